"""Metrics per handler and run: calls, processed, extra, dead letters, co-failed, latency, busy time, cost.

The figures of the spec (invocation.md, "Metrics"), computed the same way for a real run (from the
store: the call log, the work items, their payloads and busy times) and for a sync run (from the
``Invoker``'s own tally, since a sync call leaves nothing in the store). ``processed`` counts every
record of every call, failed calls included; ``extra`` is ``processed - unique``; completion latency
runs from a record's arrival to its final outcome (success or dead letter).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..rules.calls import CallOutcome
from ..store.records import ItemState
from ..store.streams import epoch_ms
from .handlers import Handler, Model

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
    rank = max(1, math.ceil(share * len(ordered)))
    return float(ordered[rank - 1])


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


def _completion(latencies: Sequence[float]) -> tuple[float, float]:
    if not latencies:
        return 0.0, 0.0
    return sum(latencies) / len(latencies), percentile(latencies, 0.99)


def store_metrics(
    store: Store,
    handler: Handler,
    *,
    since: datetime | None = None,
    prices: Prices | None = None,
    caller_wait_ms: float | None = None,
) -> Metrics:
    """The metrics of ``handler``'s async or stream work in the store (items created since ``since``).

    The counts, sums and the async latency percentile are the store's SQL aggregates
    (``store/handler_figures.py``), constant in the number of items; only a stream's per-record
    figures (unique records, dead records, co-failed, latencies), which live in its batches' payloads,
    are read item by item.
    """
    stream = handler.model is Model.STREAM
    kind = handler.batch_kind if stream else handler.call_kind
    items = store.invocations.item_totals(kind, since=since)
    calls = store.invocations.call_totals(kind, since=since)
    if stream:
        unique, dead, co_failed, (mean, p99) = _stream_figures(store, kind, since)
    else:
        unique, dead, co_failed = items.items, items.dead, 0
        mean = items.latency_sum_ms / items.finished if items.finished else 0.0
        p99 = float(items.latency_p99_ms) if items.latency_p99_ms is not None else 0.0
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


def _stream_figures(store: Store, kind: str, since: datetime | None) -> tuple[int, int, int, tuple[float, float]]:
    """A stream's unique records, dead records, co-failed and completion (mean, p99), from its batches."""
    unique = dead = co_failed = 0
    latencies: list[float] = []
    for row in store.items.figures(kind, since=since):
        payload = row.payload or {}
        unique += payload.get("size", len(payload.get("records", ())))
        for arrived, finished_ms in payload.get("completed", ()):
            latencies.append(finished_ms - arrived)
        if row.state in (ItemState.SUCCEEDED, ItemState.DEAD):
            done_ms = epoch_ms(row.updated_at)
            latencies.extend(done_ms - record[3] for record in payload.get("records", ()))
        if row.state is ItemState.DEAD:
            dead += len(payload.get("records", ()))
            co_failed += int((row.result or {}).get("co_failed", 0))
    return unique, dead, co_failed, _completion(latencies)


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
    waits: list[float] | None = None

    def __post_init__(self) -> None:
        self.waits = []

    def add_calls(self, calls: Iterable[Any]) -> None:
        for call in calls:
            self.calls += 1
            self.processed += call.records
            self.busy_ms += call.busy_ms
            self.failed_calls += call.outcome != CallOutcome.SUCCEEDED
            self.timed_out += call.outcome == CallOutcome.TIMED_OUT

    def metrics(self, handler: Handler, prices: Prices | None = None) -> Metrics:
        waits = self.waits or []
        mean, p99 = _completion(waits)
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
