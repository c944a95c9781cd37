"""One attempt at a batch: the failure policies, per-record attempts, the time limit (no store)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vardiya.clock import VirtualClock
from vardiya.errors import InvalidInput
from vardiya.invoke.batching import plan_bisect
from vardiya.invoke.execute import BatchRecord, run_attempt
from vardiya.invoke.handlers import Handler

START = datetime(2026, 12, 1, tzinfo=UTC)


def _records(ids: list[int]) -> list[BatchRecord]:
    return [BatchRecord(offset=i, key=None, record={"id": i}, arrived_ms=0) for i in ids]


def _handler(bad: set[int], policy: str, *, transient: set[int] = frozenset(), **settings: Any) -> Handler:  # type: ignore[assignment]
    def fn(record: Any, context: Any) -> Any:
        if record["id"] in bad:
            raise ValueError(f"bad {record['id']}")
        if record["id"] in transient and context.attempt == 1:
            raise TimeoutError("try again")
        return record["id"] * 10

    return Handler(name="h", fn=fn, model="stream", policy=policy, **settings)


def test_retry_batch_keeps_the_whole_batch_and_counts_co_failed() -> None:
    outcome = run_attempt(_handler({3}, "retry_batch"), _records([1, 2, 3, 4]), clock=VirtualClock(START))

    assert [call.records for call in outcome.calls] == [4]
    assert [record.offset for record in outcome.kept] == [1, 2, 3, 4]
    assert outcome.succeeded == []
    assert outcome.co_failed == 3
    assert set(outcome.errors) == {3}
    assert all(record.seen == 1 for record in outcome.kept)


def test_report_failures_keeps_only_the_failed_records() -> None:
    outcome = run_attempt(_handler({2, 4}, "report_failures"), _records([1, 2, 3, 4]), clock=VirtualClock(START))

    assert [record.offset for record in outcome.kept] == [2, 4]
    assert [(record.offset, result) for record, result in outcome.succeeded] == [(1, 10), (3, 30)]
    assert outcome.co_failed == 0


def test_bisect_splits_at_once_and_a_transient_record_passes_in_its_half() -> None:
    outcome = run_attempt(_handler(set(), "bisect", transient={2}), _records([1, 2, 3, 4]), clock=VirtualClock(START))

    # whole batch fails (record 2's first processing), then [1, 2] and [3, 4] both pass
    assert [call.records for call in outcome.calls] == [4, 2, 2]
    assert outcome.done
    assert {record.offset: record.seen for record, _ in outcome.succeeded} == {1: 2, 2: 2, 3: 2, 4: 2}


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 64), bad=st.sets(st.integers(1, 64), max_size=6))
def test_bisect_isolates_every_bad_record_with_no_co_failed(size: int, bad: set[int]) -> None:
    ids = list(range(1, size + 1))
    bad = {b for b in bad if b <= size}
    outcome = run_attempt(_handler(bad, "bisect"), _records(ids), clock=VirtualClock(START))

    assert {record.offset for record in outcome.kept} == bad
    assert outcome.co_failed == 0
    assert {record.offset for record, _ in outcome.succeeded} == set(ids) - bad
    # the engine makes exactly the calls the pure bisect plan predicts
    plan = plan_bisect(ids, lambda record: record in bad)
    assert len(outcome.calls) == plan.calls
    assert outcome.processed == plan.records_processed


def test_a_call_over_the_time_limit_fails_as_a_whole() -> None:
    clock = VirtualClock(START)

    def slow(record: Any, context: Any) -> None:
        context.clock.advance(1.0)

    handler = Handler(name="slow", fn=slow, model="stream", time_limit_s=2.5, policy="report_failures")
    outcome = run_attempt(handler, _records([1, 2, 3]), clock=clock)

    assert outcome.calls[0].outcome == "timed_out"
    assert [record.offset for record in outcome.kept] == [1, 2, 3]
    assert "over the 2.5 s limit" in (outcome.calls[0].error or "")


def test_a_batch_handler_reports_failed_offsets() -> None:
    def batch(records: list[BatchRecord], context: Any) -> list[int]:
        return [record.offset for record in records if record.offset % 2 == 0]

    handler = Handler(name="b", fn=batch, model="stream", batch=True, policy="report_failures")
    outcome = run_attempt(handler, _records([1, 2, 3, 4]), clock=VirtualClock(START))

    assert [call.records for call in outcome.calls] == [4]
    assert [record.offset for record in outcome.kept] == [2, 4]


def test_a_batch_handler_reporting_a_foreign_offset_is_an_error() -> None:
    handler = Handler(name="b", fn=lambda records, context: [99], model="stream", batch=True)

    with pytest.raises(InvalidInput, match="offset 99, which is not in its batch"):
        run_attempt(handler, _records([1, 2]), clock=VirtualClock(START))
