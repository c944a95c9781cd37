"""Rules for stream batches: what fits the time limit, how a failing batch splits. Pure, no I/O.

Time limit
    One handler call on a batch of n records takes at most ``per_call_overhead_s + n * per_record_s``
    (the worst case). A batch size whose worst case is over the per-invocation time limit is rejected
    when the consumer is configured, with the figure in the message, because such a batch could be cut
    off mid-way on every attempt and never finish.

Failure policies
    ``bisect`` halves a failing batch (the first half takes the odd record) and retries each half,
    recursively, until the bad records are alone; ``plan_bisect`` simulates that for tests and the
    planner. ``partial_failures`` splits a batch by the ids the handler reported as failed
    (``report_failures``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import ConfigurationError, InvalidInput

__all__ = [
    "BisectPlan",
    "bisect",
    "check_batch_size",
    "largest_batch_that_fits",
    "partial_failures",
    "plan_bisect",
    "worst_case_duration",
]

Record = TypeVar("Record")

_SHOWN_IDS = 5  # unknown failed ids named in a message; the rest are counted


def _figure(seconds: float) -> str:
    """A duration for a message: 1000.25, 900, 0.4 (float noise such as 899.8500000000001 rounded off)."""
    rounded = round(seconds, 6)
    return str(int(rounded)) if rounded == int(rounded) else repr(rounded)


def _duration(value: object, what: str, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInput(f"{what} must be a finite number of seconds, got {value!r}")
    if value < 0 or (positive and value == 0):
        bound = "more than 0" if positive else "0 or more"
        raise InvalidInput(f"{what} must be {bound} seconds, got {value!r}")
    return float(value)


def _batch_size(batch_size: object) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInput(f"batch_size must be a whole number of at least 1, got {batch_size!r}")
    return batch_size


def worst_case_duration(batch_size: int, *, per_record_s: float, per_call_overhead_s: float) -> float:
    """Seconds one call on a batch of ``batch_size`` records can take: overhead + size x per record."""
    size = _batch_size(batch_size)
    per_record = _duration(per_record_s, "per_record_s", positive=True)
    overhead = _duration(per_call_overhead_s, "per_call_overhead_s", positive=False)
    return overhead + size * per_record


def largest_batch_that_fits(*, per_record_s: float, per_call_overhead_s: float, time_limit_s: float) -> int:
    """The largest batch size whose worst case fits the time limit; 0 when not even one record fits."""
    per_record = _duration(per_record_s, "per_record_s", positive=True)
    overhead = _duration(per_call_overhead_s, "per_call_overhead_s", positive=False)
    limit = _duration(time_limit_s, "time_limit_s", positive=True)
    size = max(0, math.floor((limit - overhead) / per_record))
    # the division can land one off at an exact boundary; settle it with the very sum the check uses
    while size > 0 and overhead + size * per_record > limit:
        size -= 1
    while overhead + (size + 1) * per_record <= limit:
        size += 1
    return size


def check_batch_size(
    batch_size: int, *, per_record_s: float, per_call_overhead_s: float, time_limit_s: float
) -> float:
    """Reject a batch size whose worst case cannot fit the time limit; return that worst case in seconds."""
    size = _batch_size(batch_size)
    worst = worst_case_duration(size, per_record_s=per_record_s, per_call_overhead_s=per_call_overhead_s)
    limit = _duration(time_limit_s, "time_limit_s", positive=True)
    if worst <= limit:
        return worst
    largest = largest_batch_that_fits(
        per_record_s=per_record_s, per_call_overhead_s=per_call_overhead_s, time_limit_s=time_limit_s
    )
    advice = (
        f"the largest that fits is {largest}"
        if largest
        else "no batch size fits; raise the time limit or cut the per-call overhead"
    )
    raise ConfigurationError(
        f"batch_size {size} needs up to {_figure(worst)} s per invocation "
        f"({_figure(per_call_overhead_s)} s overhead + {size} × {_figure(per_record_s)} s), "
        f"over the {_figure(limit)} s limit; {advice}"
    )


def bisect(batch: Sequence[Record]) -> tuple[list[Record], list[Record]]:
    """Split a batch in two halves, in order; the first half takes the odd record."""
    if len(batch) < 2:
        raise InvalidInput(f"a batch of {len(batch)} record(s) cannot be split; bisect needs at least 2")
    middle = (len(batch) + 1) // 2
    return list(batch[:middle]), list(batch[middle:])


@dataclass(frozen=True, kw_only=True)
class BisectPlan:
    """What ``bisect`` does to one batch whose bad records never pass."""

    calls: int
    """Handler calls, the first (whole-batch) call included."""
    isolated_bad: tuple[Any, ...]
    """Bad records, each failed alone in a batch of one: only these are dead-lettered."""
    healthy_processed: tuple[Any, ...]
    """Healthy records, each processed by exactly one successful call, in batch order."""
    records_processed: int
    """Record processings over every call, failed calls included (the metric's "processed")."""


def plan_bisect(batch: Sequence[Record], is_bad: Callable[[Record], bool]) -> BisectPlan:
    """Simulate ``bisect`` on a batch: a call fails when any of its records is bad, and then splits.

    A bad record here is poison (it fails on every attempt); a call on records that are all healthy
    succeeds. Splitting goes on until every bad record is alone, so no healthy record is dead-lettered.
    """
    if not batch:
        raise InvalidInput("a batch holds at least one record; got an empty batch")
    calls = 0
    processed = 0
    bad: list[Record] = []
    healthy: list[Record] = []

    def call(part: Sequence[Record]) -> None:
        nonlocal calls, processed
        calls += 1
        processed += len(part)
        if not any(is_bad(record) for record in part):
            healthy.extend(part)
        elif len(part) == 1:
            bad.append(part[0])
        else:
            first, second = bisect(part)
            call(first)
            call(second)

    call(batch)
    return BisectPlan(
        calls=calls, isolated_bad=tuple(bad), healthy_processed=tuple(healthy), records_processed=processed
    )


def _identity(record: Any) -> Any:
    return record


def partial_failures(
    batch: Sequence[Record],
    failed_ids: Collection[Hashable],
    *,
    id_of: Callable[[Record], Hashable] = _identity,
) -> tuple[list[Record], list[Record]]:
    """Split a batch by the ids its handler reported as failed: (to retry, succeeded), both in order.

    ``id_of`` gives a record's id (by default the record is its own id). Every reported id must be in
    the batch, and name one record only: anything else means the handler's report cannot be trusted.
    """
    if isinstance(failed_ids, str | bytes):
        raise InvalidInput(f"failed ids must be a collection of ids, not one string: {failed_ids!r}")
    reported = list(dict.fromkeys(failed_ids))  # a repeated id is one failure; report order kept
    failed = set(reported)
    counts: dict[Hashable, int] = {}
    for record in batch:
        record_id = id_of(record)
        counts[record_id] = counts.get(record_id, 0) + 1
    unknown = [record_id for record_id in reported if record_id not in counts]
    if unknown:
        shown = ", ".join(repr(record_id) for record_id in unknown[:_SHOWN_IDS])
        more = f" and {len(unknown) - _SHOWN_IDS} more" if len(unknown) > _SHOWN_IDS else ""
        raise InvalidInput(
            f"the handler reported {len(unknown)} failed id(s) that are not in the batch: {shown}{more}; "
            "report the ids of the batch's own records"
        )
    ambiguous = [record_id for record_id in reported if counts[record_id] > 1]
    if ambiguous:
        raise InvalidInput(
            f"failed id {ambiguous[0]!r} names {counts[ambiguous[0]]} records of the batch; "
            "report_failures needs ids that are unique within a batch"
        )
    to_retry = [record for record in batch if id_of(record) in failed]
    succeeded = [record for record in batch if id_of(record) not in failed]
    return to_retry, succeeded
