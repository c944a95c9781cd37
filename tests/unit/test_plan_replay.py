"""The replay: the example night through the engine's own code, and the lessons of the spec in it."""

from __future__ import annotations

import dataclasses
import json

import pytest

from vardiya.clock import VirtualClock
from vardiya.errors import InvalidInput
from vardiya.invoke.execute import BatchRecord, run_attempt
from vardiya.invoke.handlers import FailurePolicy, Model
from vardiya.plan.compare import Comparison, compare
from vardiya.plan.gate import MemoryKeys
from vardiya.plan.profile import Profile
from vardiya.plan.replay import ORIGIN, Replay, replay
from vardiya.plan.scripted import ScriptedHandler, handler_for
from vardiya.plan.workload import Workload, parse_workload
from vardiya.store.records import ItemState


@pytest.fixture(scope="module")
def comparison(night: Workload, profile: Profile) -> Comparison:
    return compare(night, profile)


def _small() -> Workload:
    lines = ["record,outcome"] + [
        f"{i},{'poison' if i % 37 == 0 else 'transient' if i % 11 == 0 else 'ok'}" for i in range(1, 301)
    ]
    return parse_workload(lines, source="small")


def test_a_replay_is_deterministic(profile: Profile) -> None:
    small = _small()
    for model, policy in [("sync", None), ("async", None), ("stream", "retry_batch"), ("stream", "bisect")]:
        first = json.dumps(replay(small, profile, model=model, batch_size=20, policy=policy, dedup=True).to_json())
        second = json.dumps(replay(small, profile, model=model, batch_size=20, policy=policy, dedup=True).to_json())
        assert first == second


def test_the_counts_follow_from_the_night(comparison: Comparison, night: Workload) -> None:
    counts = night.counts()
    transient, poison = counts["transient"], counts["poison"]
    sync, async_, stream = (row.metrics for row in comparison.models)
    # sync: the caller retries each failure once; the poison errors are the caller's, no dead letters
    assert (sync.calls, sync.caller_errors, sync.dead_letter) == (20_000 + transient + poison, poison, 0)
    # async: the engine makes 3 attempts; a transient passes on the second, a poison is dead after the third
    assert (async_.calls, async_.dead_letter, async_.co_failed) == (20_000 + transient + 2 * poison, poison, 0)
    # retry_batch at 100: every batch with a poison reading is dead whole
    assert (stream.dead_letter, stream.co_failed) == (100 * poison, 100 * poison - poison)
    assert stream.calls * 100 == stream.processed


def test_busy_time_is_calls_times_overhead_plus_processed_times_the_record_time(comparison: Comparison) -> None:
    for row in comparison.models + comparison.policies:
        m = row.metrics
        assert m.busy_ms == pytest.approx(m.calls * 250 + m.processed * 400)
        assert m.cost == pytest.approx(m.calls * 0.0005 + m.busy_ms * 0.0000025)


def test_the_caller_s_wait_falls_while_completion_grows(comparison: Comparison) -> None:
    sync, async_, stream = (row.metrics for row in comparison.models)
    assert sync.caller_wait_ms is not None and async_.caller_wait_ms is not None and stream.caller_wait_ms is not None
    assert sync.caller_wait_ms > async_.caller_wait_ms == stream.caller_wait_ms == 5
    assert sync.completion_mean_ms < async_.completion_mean_ms < stream.completion_mean_ms
    assert sync.completion_p99_ms < async_.completion_p99_ms < stream.completion_p99_ms
    # sync: 250 + 400 ms, a transient twice with the caller's 200 ms between; async: one 60 s retry
    assert sync.completion_p99_ms == pytest.approx(1_500)
    assert async_.completion_p99_ms == pytest.approx(5 + 650 + 60_000 + 650)


def test_bisect_and_report_failures_isolate_the_poison_that_retry_batch_dead_letters_whole(
    comparison: Comparison, night: Workload
) -> None:
    poison = night.counts()["poison"]
    retry_batch = comparison.policy("retry_batch").metrics
    bisect = comparison.policy("bisect").metrics
    report = comparison.policy("report_failures").metrics
    assert retry_batch.co_failed > 0 and bisect.co_failed == report.co_failed == 0
    assert bisect.dead_letter == report.dead_letter == poison < retry_batch.dead_letter
    assert bisect.calls > report.calls == retry_batch.calls  # bisect pays in calls for its halves
    assert report.processed == comparison.model("async").metrics.processed  # only failed records come back
    assert report.cost < retry_batch.cost and report.cost < bisect.cost


def test_a_fixed_worker_pool_delays_completion_but_not_the_work(profile: Profile) -> None:
    small = _small()
    unbounded = replay(small, profile, model="async").metrics
    pooled = replay(small, dataclasses.replace(profile, concurrency=2), model="async").metrics
    assert (pooled.calls, pooled.processed, pooled.dead_letter) == (unbounded.calls, unbounded.processed, unbounded.dead_letter)
    # 300 records at 250/s need 195 s of work: two workers cannot keep up with the arrivals
    assert pooled.completion_mean_ms > 5 * unbounded.completion_mean_ms
    sync = replay(small, dataclasses.replace(profile, concurrency=2), model="sync").metrics
    assert sync.caller_wait_ms is not None and sync.caller_wait_ms > 10 * 669


def test_a_record_s_own_duration_counts_and_an_overlong_call_times_out(profile: Profile) -> None:
    workload = parse_workload(["record,outcome,duration_ms", "1,ok,", "2,ok,1000000", "3,ok,"])
    row = replay(workload, profile, model="async")
    assert row.timed_out == 3 and not row.fits_limit  # record 2's call runs 1,000.25 s, 3 attempts
    assert (row.metrics.dead_letter, row.metrics.calls) == (1, 5)
    assert row.busy_ms == pytest.approx(2 * 650 + 3 * 1_000_250)


def test_a_batch_window_cuts_partial_batches(profile: Profile) -> None:
    small = _small()
    full = replay(small, profile, model="stream", batch_size=100)
    windowed = replay(small, dataclasses.replace(profile, batch_window_s=0.1), model="stream", batch_size=100)
    # at 250 records a second, a 0.1 s window lets about 26 records into a batch before it is cut
    assert full.metrics.calls < windowed.metrics.calls
    cut_at_once = replay(small, dataclasses.replace(profile, batch_window_s=0.0), model="stream", batch_size=100)
    assert cut_at_once.metrics.calls == replay(small, profile, model="stream", batch_size=1).metrics.calls


def test_bad_plans_are_refused(profile: Profile) -> None:
    with pytest.raises(InvalidInput, match="batch size must be a whole number of at least 1, got 0"):
        replay(_small(), profile, model="stream", batch_size=0)
    with pytest.raises(InvalidInput, match="unknown invocation model 'batch'"):
        replay(_small(), profile, model="batch")
    with pytest.raises(InvalidInput, match="unknown failure policy 'split'"):
        replay(_small(), profile, model="stream", policy="split")


def test_the_scripted_handler_fails_transients_once_and_poison_always(profile: Profile) -> None:
    workload = parse_workload(["record,outcome", "1,ok", "2,transient", "3,poison"])
    handler = handler_for(ScriptedHandler(workload, profile), profile, model=Model.STREAM, batch_size=3,
                          policy=FailurePolicy.REPORT_FAILURES)
    clock = VirtualClock(ORIGIN)
    batch = [BatchRecord(offset=n, key=None, record={"id": n}, arrived_ms=0) for n in (1, 2, 3)]
    first = run_attempt(handler, batch, clock=clock)
    assert [record.offset for record in first.kept] == [2, 3]
    assert first.calls[0].busy_ms == pytest.approx(250 + 3 * 400)
    second = run_attempt(handler, first.kept, clock=clock)
    assert [record.offset for record in second.kept] == [3]


def test_memory_keys_follow_the_store_s_rule_for_dead_items() -> None:
    clock = VirtualClock(ORIGIN)
    keys = MemoryKeys(clock=clock, window_s=60)
    record = BatchRecord(offset=1, key=None, record={"id": 1}, arrived_ms=0, dedup_key="1")
    gate = keys.for_item(7)
    keys.states[7] = ItemState.RUNNING
    assert gate.admit([record]) == {}
    gate.settle([(record, {"ok": True})], [])
    keys.states[7] = ItemState.DEAD
    clock.advance(3600)
    # past the window, yet held by a dead item: still live, so another item's copy is a duplicate
    assert keys.for_item(8).admit([record]) == {1: {"ok": True}}
    forgetful = MemoryKeys(clock=clock, window_s=60, retain_dead=False)
    forgetful.states[7] = ItemState.DEAD
    gate = forgetful.for_item(7)
    gate.admit([record])
    gate.settle([(record, None)], [])
    clock.advance(3600)
    assert forgetful.for_item(8).admit([record]) == {} and forgetful.reprocessed == 1


def test_a_redrive_replays_the_dead_items_with_fresh_attempts(profile: Profile) -> None:
    small = _small()
    replayed = Replay(small, profile, model="stream", batch_size=20).run()
    dead, calls = replayed.dead_letter, replayed.calls
    redriven = replayed.redrive(3600)
    assert len(redriven) == dead // 20  # whole batches under retry_batch
    assert replayed.calls == calls + 3 * len(redriven)  # each poison batch dies again after 3 attempts
    assert replayed.dead_letter == dead and len(replayed.dead) == len(redriven)
