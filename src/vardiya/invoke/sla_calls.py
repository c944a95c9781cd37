"""The SLA of a handler's calls, as a worker sees them: misses noted per call, stored per claim.

A worker notes every call of a handler with an ``sla`` that took longer (``note``: one comparison per
call, nothing for a handler without one) and stores the misses of a claim together when it has run
it (``flush``: one upsert), so a handler whose every call is slow costs one statement per claim, not
one per call. Each miss is logged as it is noted (``vardiya.sla``).

A sync call (``Invoker.call``) has no worker and no claim: ``note_sync_calls`` logs and stores the
misses of its calls at once, so a caller's slow call is counted and shown by ``vardiya status`` and
Prometheus as a worker's would be.
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

__all__ = ["CallSla", "note_sync_calls"]


class CallSla:
    """The SLA misses of one worker's calls, waiting to be stored."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self._store, self._clock = store, clock
        self._misses: list[SlaMiss] = []
        self._lock = threading.Lock()

    def note(self, handler: Handler, item_id: int, busy_ms: float) -> None:
        """One call of ``handler`` for ``item_id`` that was busy ``busy_ms``: a miss if over its sla."""
        miss = _miss(handler, f"item {item_id}", busy_ms, self._clock)
        if miss is not None:
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


def _miss(handler: Handler, ref: str, busy_ms: float, clock: Clock) -> SlaMiss | None:
    """The miss of one call busy ``busy_ms``, logged, if it went over the handler's sla; else None."""
    sla = handler.sla
    if sla is None or busy_ms <= sla.total_seconds() * 1000:
        return None
    log_miss("handler", handler.name, ref, busy_ms / 1000, sla)
    return SlaMiss(
        family=FailureFamily.HANDLER, name=handler.name, ref=ref, expected_ms=sla.total_seconds() * 1000,
        took_ms=busy_ms, at=clock.now(),
    )


def note_sync_calls(
    store: Store | None, clock: Clock, handler: Handler, calls: Sequence[CallRecord], *, key: str | None = None
) -> None:
    """Log the calls of a sync attempt over the handler's sla and store them (one upsert, if any).

    The ref names the model and, when the caller gave one, the call's key (a sync call has no item).
    Without a store (an ``Invoker(None, app)``) the misses are only logged: there is nowhere to count.
    """
    if handler.sla is None:
        return
    ref = "sync call" if key is None else f"sync call {key}"
    misses = [miss for call in calls if (miss := _miss(handler, ref, call.busy_ms, clock)) is not None]
    if misses and store is not None:
        store.failures.sla_missed(misses)
