"""Which work-item kinds a worker leaves queued because what they run is paused. Read from the store.

The service layer's, because it knows every kind a worker serves (ticks, pipeline runs, periodic
functions as well as calls); the claim loop is given one (``invoke.claims.Pauses``).

A worker asks ``PausedKinds.kinds()`` on every loop; the store is read at most once per ``refresh_s``
(on the store's monotonic clock), so a pause or a resume reaches a busy worker within a second at the
cost of one small read a second. A paused handler's calls and stream batches, a paused slot job's
ticks, a paused periodic function's runs and a paused pipeline's runs stay ready: not claimed, not
failed, not charged an attempt; they run when the name is resumed. A paused pipeline *trigger* only
stops its scheduler from firing: the runs it queued before share their pipeline's kind with every
other trigger's and are left to run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..invoke.handlers import BATCH_PREFIX, CALL_PREFIX
from ..schedule.periodic import periodic_kind
from ..schedule.plan import pipeline_kind, tick_kind
from ..store.controls import ControlKind, Pause

if TYPE_CHECKING:
    from ..store.api import Store

__all__ = ["PAUSE_REFRESH_S", "PausedKinds", "work_kinds"]

log = logging.getLogger("vardiya.worker")

#: How often a worker reads what is paused.
PAUSE_REFRESH_S = 1.0


def work_kinds(pauses: Iterable[Pause]) -> frozenset[str]:
    """The work-item kinds that ``pauses`` hold back."""
    kinds: set[str] = set()
    for pause in pauses:
        if pause.kind is ControlKind.HANDLER:
            kinds.update((CALL_PREFIX + pause.name, BATCH_PREFIX + pause.name))
        elif pause.kind is ControlKind.SLOT_JOB:
            kinds.add(tick_kind(pause.name))
        elif pause.kind is ControlKind.PERIODIC:
            kinds.add(periodic_kind(pause.name))
        elif pause.kind is ControlKind.PIPELINE:
            kinds.add(pipeline_kind(pause.name))
    return frozenset(kinds)


class PausedKinds:
    """A worker's view of what is paused, re-read at most every ``refresh_s``; logs each change once."""

    def __init__(self, store: Store, *, refresh_s: float = PAUSE_REFRESH_S) -> None:
        self._store = store
        self.refresh_s = refresh_s
        self._kinds: frozenset[str] = frozenset()
        self._read_at: float | None = None

    def kinds(self) -> frozenset[str]:
        """The kinds held back now (as last read)."""
        now = self._store.clock.monotonic()
        if self._read_at is None or now - self._read_at >= self.refresh_s:
            self._read_at = now
            try:
                kinds = work_kinds(self._store.controls.paused())
            except Exception:
                log.warning("could not read what is paused; keeping the last view", exc_info=True)
                return self._kinds
            for kind in sorted(kinds - self._kinds):
                log.info("%s is paused: its items stay queued until it is resumed", kind, extra={"kind": kind})
            for kind in sorted(self._kinds - kinds):
                log.info("%s is resumed: its queued items run", kind, extra={"kind": kind})
            self._kinds = kinds
        return self._kinds

    def active(self, kinds: Sequence[str]) -> list[str]:
        """``kinds`` without the paused ones."""
        paused = self.kinds()
        return [kind for kind in kinds if kind not in paused]
