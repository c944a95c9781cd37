"""The invocation models run for real on each backend: retries by owner, dead letters, policies, dedup.

Every test runs on SQLite and on PostgreSQL and checks the same expected figures, so the two backends
give identical counts (calls, processed, dead letters, co-failed) for each model and policy.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from tests.support.invocation import RETRY, Scripted, outcomes, records, workload_app
from vardiya.app import App
from vardiya.clock import VirtualClock
from vardiya.invoke import dlq
from vardiya.invoke.execute import BatchRecord, run_attempt
from vardiya.invoke.invoker import Invoker
from vardiya.service.worker import Worker, WorkerSettings
from vardiya.store import ItemState, Store
from vardiya.store.schema import work_items

N = 500
BATCH = 50
TABLE = outcomes(N)
POISON = sorted(i for i, o in TABLE.items() if o == "poison")
TRANSIENT = sorted(i for i, o in TABLE.items() if o == "transient")


def _drain(store: Store, app: App) -> None:
    Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)


def _simulate(handler: Any, ids: list[int]) -> dict[str, int]:
    """What the engine's own attempt logic predicts, batch by batch, with no store at all."""
    fn = Scripted(TABLE)
    handler = handler.replace(fn=fn)
    calls = processed = dead = co_failed = 0
    for start in range(0, len(ids), BATCH):
        batch = [BatchRecord(offset=i, key=None, record={"id": i}, arrived_ms=0) for i in ids[start : start + BATCH]]
        for attempt in range(1, RETRY.max_attempts + 1):
            outcome = run_attempt(handler, batch, clock=VirtualClock())
            calls += len(outcome.calls)
            processed += outcome.processed
            if outcome.done:
                break
            batch = outcome.kept
            if attempt == RETRY.max_attempts:
                dead += len(outcome.kept)
                co_failed += outcome.co_failed
    return {"calls": calls, "processed": processed, "dead_letter": dead, "co_failed": co_failed}


def _counts(metrics: Any) -> dict[str, int]:
    return {key: getattr(metrics, key) for key in ("calls", "processed", "dead_letter", "co_failed")}


def test_async_engine_retries_transients_and_dead_letters_poison_with_history(store: Store) -> None:
    app, fn = workload_app(TABLE)
    hooked: list[tuple[str, int]] = []
    app.handlers["v_async"] = app.handlers["v_async"].replace(on_failure=lambda name, item, error: hooked.append((name, item.id)))
    invoker = Invoker(store, app)
    handles = invoker.submit_many("v_async", records(N))

    _drain(store, app)

    metrics = invoker.metrics("v_async")
    assert _counts(metrics) == {
        "calls": N + len(TRANSIENT) + 2 * len(POISON),
        "processed": N + len(TRANSIENT) + 2 * len(POISON),
        "dead_letter": len(POISON),
        "co_failed": 0,
    }
    assert metrics.extra == len(TRANSIENT) + 2 * len(POISON)
    poison = invoker.status(handles[POISON[0] - 1])
    assert poison.state is ItemState.DEAD and poison.attempts == 3
    assert [a.outcome.value for a in poison.history] == ["failed", "failed", "failed"]
    assert all("is poison" in (a.error or "") for a in poison.history)
    transient = invoker.status(handles[TRANSIENT[0] - 1])
    assert transient.state is ItemState.SUCCEEDED and transient.attempts == 2
    assert transient.result == {"id": TRANSIENT[0], "valid": True}
    # the error did not vanish: the hook saw every dead letter, and so does the listing
    assert sorted(item_id for _, item_id in hooked) == sorted(h.id for h in handles if h.id in {handles[p - 1].id for p in POISON})
    assert [letter.handler for letter in dlq.dead_letters(store)] == ["v_async"] * len(POISON)
    assert all(fn.processed[p] == 3 for p in POISON)


def test_sync_retries_belong_to_the_caller_and_leave_no_dead_letters(store: Store, clock: VirtualClock) -> None:
    app, fn = workload_app(TABLE)
    invoker = Invoker(store, app)
    before = clock.now()

    assert invoker.call("v_sync", {"id": TRANSIENT[0]}) == {"id": TRANSIENT[0], "valid": True}
    assert clock.now() - before == timedelta(seconds=0.2)  # one caller retry, 200 ms later
    with pytest.raises(ValueError, match="is poison"):
        invoker.call("v_sync", {"id": POISON[0]})

    assert fn.processed == {TRANSIENT[0]: 2, POISON[0]: 2}
    metrics = invoker.metrics("v_sync")
    assert (metrics.calls, metrics.dead_letter, metrics.caller_errors) == (4, 0, 1)
    with store.reading() as connection:
        assert connection.execute(sa.select(sa.func.count()).select_from(work_items)).scalar_one() == 0


@pytest.mark.parametrize("policy", ["retry_batch", "bisect", "report_failures"])
def test_stream_policies_match_the_engine_prediction(store: Store, policy: str) -> None:
    app, fn = workload_app(TABLE, batch_size=BATCH)
    invoker = Invoker(store, app)
    invoker.append_many(f"v_{policy}", records(N))

    _drain(store, app)

    counts = _counts(invoker.metrics(f"v_{policy}"))
    assert counts == _simulate(app.get_handler(f"v_{policy}"), list(range(1, N + 1)))
    poisoned_batches = len({(p - 1) // BATCH for p in POISON})
    if policy == "retry_batch":
        assert counts["dead_letter"] == poisoned_batches * BATCH
        assert counts["co_failed"] == poisoned_batches * BATCH - len(POISON)
        assert counts["calls"] == 3 * poisoned_batches + 2 * (N // BATCH - poisoned_batches)
    else:
        assert counts["dead_letter"] == len(POISON) and counts["co_failed"] == 0
    if policy == "report_failures":
        # only the failed ids were retried: every healthy record ran exactly once
        assert counts["processed"] == N + len(TRANSIENT) + 2 * len(POISON)
        assert all(fn.processed[i] == 1 for i, o in TABLE.items() if o == "ok")


def test_dedup_runs_a_duplicate_once_and_returns_the_stored_outcome(store: Store) -> None:
    app, fn = workload_app(TABLE, dedup=True)
    invoker = Invoker(store, app)
    first = invoker.submit("v_async", {"id": 1})
    _drain(store, app)
    second = invoker.submit("v_async", {"id": 1})
    _drain(store, app)

    assert fn.processed[1] == 1
    assert invoker.status(second).result == invoker.status(first).result == {"id": 1, "valid": True}
    assert invoker.call("v_async", {"id": 1}) == {"id": 1, "valid": True}
    assert fn.processed[1] == 1


def test_a_redrive_after_the_window_does_not_reprocess_records_that_succeeded(store: Store, clock: VirtualClock) -> None:
    app, fn = workload_app(TABLE, batch_size=BATCH, dedup=True)
    invoker = Invoker(store, app)
    invoker.append_many("v_retry_batch", records(N))
    _drain(store, app)
    letters = dlq.dead_letters(store, handler="v_retry_batch")
    healthy = sum(letter.co_failed for letter in letters)
    assert healthy == len({(p - 1) // BATCH for p in POISON}) * BATCH - len(POISON)
    before = dict(fn.processed)

    clock.advance(timedelta(hours=72))  # dead letters redriven by hand three days later, past the 24 h window
    report = dlq.redrive(store, handler="v_retry_batch", rate_per_s=10)
    assert report.items == len(letters)
    assert report.already_succeeded == healthy
    assert report.would_reprocess_without_retention == healthy
    _drain(store, app)

    reprocessed = {i for i in fn.processed if fn.processed[i] != before.get(i)}
    assert reprocessed == set(POISON)  # only the poison records ran again
    assert len(dlq.dead_letters(store, handler="v_retry_batch")) == len(letters)


def test_redrive_rate_spaces_items_out_and_dry_run_changes_nothing(store: Store, clock: VirtualClock) -> None:
    app, _ = workload_app(TABLE)
    invoker = Invoker(store, app)
    invoker.submit_many("v_async", [{"id": p} for p in POISON])
    _drain(store, app)

    dry = dlq.redrive(store, handler="v_async", dry_run=True)
    assert dry.items == len(POISON) and len(dlq.dead_letters(store)) == len(POISON)
    report = dlq.redrive(store, handler="v_async", rate_per_s=2)
    assert report.items == len(POISON)
    items = sorted(store.items.list(kind="call:v_async"), key=lambda item: item.id)
    offsets = [(item.run_after - clock.now()).total_seconds() for item in items]
    assert offsets == [k * 0.5 for k in range(len(POISON))]


def test_ordered_stream_keeps_order_per_key_through_retries(store: Store) -> None:
    seen: list[tuple[str, int]] = []
    failed_once: set[int] = set()

    def record_order(record: Any, context: Any) -> None:
        if record["n"] % 7 == 0 and record["n"] not in failed_once:
            failed_once.add(record["n"])
            raise TimeoutError("retry me")
        seen.append((record["key"], record["n"]))

    app = App("ordered")
    app.handler("ordered", model="stream", batch_size=5, ordered=True, lanes=3, retry=RETRY, policy="report_failures")(record_order)
    invoker = Invoker(store, app)
    rows = [{"key": f"meter-{n % 4}", "n": n} for n in range(60)]
    invoker.append_many("ordered", rows, keys=[row["key"] for row in rows])

    _drain(store, app)

    for key in {row["key"] for row in rows}:
        numbers = [n for k, n in seen if k == key]
        assert numbers == sorted(numbers) and len(numbers) == 15


def test_purge_removes_dead_letters_and_their_history(store: Store) -> None:
    app, _ = workload_app(TABLE)
    Invoker(store, app).submit_many("v_async", [{"id": p} for p in POISON])
    _drain(store, app)

    assert dlq.purge(store, handler="v_async", dry_run=True)["items"] == len(POISON)
    assert dlq.purge(store, error="poison")["items"] == len(POISON)
    assert dlq.dead_letters(store) == []
