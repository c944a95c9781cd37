"""Metrics per handler and run: calls, processed, extra, dead letters, co-failed, latency, busy time, cost.

The figures of the spec (invocation.md, "Metrics"), computed the same way for a real run (from the
store: the call log, the work items, their payloads and busy times) and for a sync run (from the
``Invoker``'s own tally, since a sync call leaves nothing in the store). ``processed`` counts every
record of every call, failed calls included; ``extra`` is ``processed - unique``; completion latency
runs from a record's arrival to its final outcome (success or dead letter).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..rules.calls import CallOutcome
from ..store.handler_figures import nearest_rank_position
from .handlers import Handler, Model
from .sketch import DurationSketch

if TYPE_CHECKING:
    from ..store.api import Store

__all__ = ["Metrics", "Prices", "Tally", "percentile", "store_metrics"]


@dataclass(frozen=True, kw_only=True)
class Prices:
    """A price model: per call, and per ms of busy time (busy = the time handlers ran)."""

    per_call: float = 0.0
    per_ms: float = 0.0

    def cost(self, calls: int, busy_ms: float) -> float:
        return calls * self.per_call + busy_ms * self.per_ms


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile (``share`` 0.99 for p99); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[nearest_rank_position(len(ordered), share) - 1])


@dataclass(frozen=True, kw_only=True)
class Metrics:
    """What one run of one handler under one model did."""

    handler: str
    model: str
    calls: int
    processed: int
    unique: int
    dead_letter: int
    co_failed: int
    caller_wait_ms: float | None
    completion_mean_ms: float
    completion_p99_ms: float
    busy_ms: float
    cost: float
    fits_limit: bool
    failed_calls: int = 0
    caller_errors: int = 0
    """Sync: calls whose error reached the caller after its retries."""

    @property
    def extra(self) -> int:
        """Processing beyond one per record: retries and reprocessed healthy records."""
        return self.processed - self.unique

    def to_json(self) -> dict[str, Any]:
        values = asdict(self)
        values["extra"] = self.extra
        return values


def store_metrics(
    store: Store,
    handler: Handler,
    *,
    since: datetime | None = None,
    prices: Prices | None = None,
    caller_wait_ms: float | None = None,
) -> Metrics:
    """The metrics of ``handler``'s async or stream work in the store (items created since ``since``).

    Every figure is a SQL aggregate of the store (``store/handler_figures.py``): counts, sums and the
    nearest-rank p99, a stream's per-record ones read from its batches' JSON documents in SQL, so no
    item is read into Python.
    """
    stream = handler.model is Model.STREAM
    kind = handler.batch_kind if stream else handler.call_kind
    items = store.invocations.item_totals(kind, since=since)
    calls = store.invocations.call_totals(kind, since=since)
    if stream:
        batches = store.invocations.stream_totals(kind, since=since)
        unique, dead, co_failed = batches.unique, batches.dead, batches.co_failed
        latency_count, latency_sum, latency_p99 = batches.latencies, batches.latency_sum_ms, batches.latency_p99_ms
    else:
        unique, dead, co_failed = items.items, items.dead, 0
        latency_count, latency_sum, latency_p99 = items.finished, items.latency_sum_ms, items.latency_p99_ms
    mean = latency_sum / latency_count if latency_count else 0.0
    p99 = float(latency_p99) if latency_p99 is not None else 0.0
    # A successful async call is told by its item (busy_ms), not by a call-log row: one call of one
    # record that succeeded.
    count = calls.calls + items.told_calls
    busy = calls.busy_ms + items.told_busy_ms
    return Metrics(
        handler=handler.name,
        model=handler.model.value,
        calls=count,
        processed=calls.records + items.told_calls,
        unique=unique,
        dead_letter=dead,
        co_failed=co_failed,
        caller_wait_ms=caller_wait_ms,
        completion_mean_ms=mean,
        completion_p99_ms=p99,
        busy_ms=busy,
        cost=(prices or Prices()).cost(count, busy),
        fits_limit=calls.timed_out == 0,
        failed_calls=calls.failed,
    )


@dataclass
class Tally:
    """A running count of sync calls, kept by an ``Invoker`` (a sync call leaves nothing in the store)."""

    calls: int = 0
    processed: int = 0
    unique: int = 0
    busy_ms: float = 0.0
    failed_calls: int = 0
    caller_errors: int = 0
    timed_out: int = 0
    #: Each sync call's wait (ms), in bounded memory: exact for the first 4,096 calls, then p99 within
    #: 0.5% (``sketch.DurationSketch``); the mean stays exact.
    waits: DurationSketch = field(default_factory=DurationSketch)

    def add_calls(self, calls: Iterable[Any]) -> None:
        for call in calls:
            self.calls += 1
            self.processed += call.records
            self.busy_ms += call.busy_ms
            self.failed_calls += call.outcome != CallOutcome.SUCCEEDED
            self.timed_out += call.outcome == CallOutcome.TIMED_OUT

    def metrics(self, handler: Handler, prices: Prices | None = None) -> Metrics:
        waits = self.waits
        mean = waits.total / waits.count if waits.count else 0.0
        p99 = waits.value_at_rank(nearest_rank_position(waits.count, 0.99)) if waits.count else 0.0
        return Metrics(
            handler=handler.name,
            model=Model.SYNC.value,
            calls=self.calls,
            processed=self.processed,
            unique=self.unique,
            dead_letter=0,
            co_failed=0,
            caller_wait_ms=mean,
            completion_mean_ms=mean,
            completion_p99_ms=p99,
            busy_ms=self.busy_ms,
            cost=(prices or Prices()).cost(self.calls, self.busy_ms),
            fits_limit=self.timed_out == 0,
            failed_calls=self.failed_calls,
            caller_errors=self.caller_errors,
        )
