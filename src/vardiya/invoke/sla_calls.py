"""The SLA of a handler's calls, as a worker sees them: misses noted per call, stored per claim.

A worker notes every call of a handler with an ``sla`` that took longer (``note``: one comparison per
call, nothing for a handler without one) and stores the misses of a claim together when it has run
it (``flush``: one upsert), so a handler whose every call is slow costs one statement per claim, not
one per call. Each miss is logged as it is noted (``vardiya.sla``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..sla import log_miss
from ..store.failures import FailureFamily, SlaMiss

if TYPE_CHECKING:
    from ..clock import Clock
    from ..store.api import Store
    from .execute import CallRecord
    from .handlers import Handler

__all__ = ["CallSla"]


class CallSla:
    """The SLA misses of one worker's calls, waiting to be stored."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self._store, self._clock = store, clock
        self._misses: list[SlaMiss] = []
        self._lock = threading.Lock()

    def note(self, handler: Handler, item_id: int, busy_ms: float) -> None:
        """One call of ``handler`` for ``item_id`` that was busy ``busy_ms``: a miss if over its sla."""
        sla = handler.sla
        if sla is None or busy_ms <= sla.total_seconds() * 1000:
            return
        ref = f"item {item_id}"
        log_miss("handler", handler.name, ref, busy_ms / 1000, sla)
        miss = SlaMiss(
            family=FailureFamily.HANDLER, name=handler.name, ref=ref, expected_ms=sla.total_seconds() * 1000,
            took_ms=busy_ms, at=self._clock.now(),
        )
        with self._lock:
            self._misses.append(miss)

    def note_calls(self, handler: Handler, item_id: int, calls: Sequence[CallRecord]) -> None:
        """Every call of an attempt (a stream batch may be split into several)."""
        if handler.sla is not None:
            for call in calls:
                self.note(handler, item_id, call.busy_ms)

    def flush(self) -> None:
        """Store the misses noted so far."""
        with self._lock:
            misses, self._misses = self._misses, []
        if misses:
            self._store.failures.sla_missed(misses)
