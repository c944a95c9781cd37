"""A replay and a real run of the same workload agree: the planner runs the engine, not a model of it.

The real run is the store-backed one (``Invoker`` and ``Worker`` on SQLite, on a virtual clock) with
the very handler the replay uses, the scripted one, registered in an app; the replay is the planner's
event loop with no store at all. They must agree on calls, processed records, dead letters,
co-failed records and busy time, for each model and policy, when calls time out, and through a
redrive with dedup keys.
"""

from __future__ import annotations

import contextlib
import dataclasses
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.invocation import outcomes
from vardiya.app import App
from vardiya.clock import VirtualClock
from vardiya.invoke import dlq
from vardiya.invoke.handlers import Handler, Model
from vardiya.invoke.invoker import Invoker
from vardiya.invoke.metrics import Metrics
from vardiya.plan.dedup import plan_dedup
from vardiya.plan.profile import Profile, load_profile
from vardiya.plan.replay import Replay
from vardiya.plan.scripted import ScriptedHandler, handler_for
from vardiya.plan.workload import Outcome, Workload, from_store
from vardiya.service.worker import Worker, WorkerSettings
from vardiya.store import Store

N = 310
BATCH = 50
TABLE = outcomes(N)
WORKLOAD = Workload.of(TABLE, source="contract")
PROFILE = load_profile(Path(__file__).resolve().parents[2] / "examples" / "meter_validation" / "profile.toml")

sqlite_only = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


def _handler(profile: Profile, model: str, policy: str | None, *, dedup: bool = False) -> Handler:
    return handler_for(
        ScriptedHandler(WORKLOAD, profile), profile, model=model, batch_size=BATCH,
        policy=policy or "retry_batch", dedup=dedup, name="planned",
    )


def _real_run(store: Store, handler: Handler) -> tuple[App, Invoker]:
    app = App("planned")
    app.add_handler(handler)
    invoker = Invoker(store, app)
    records = [{"id": record} for record in TABLE]
    if handler.model is Model.SYNC:
        for record in records:
            with contextlib.suppress(Exception):  # a poison record's error is the caller's; counted in the tally
                invoker.call(handler.name, record)
    elif handler.model is Model.ASYNC:
        invoker.submit_many(handler.name, records)
    else:
        invoker.append_many(handler.name, records)
    Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    return app, invoker


def _counts(metrics: Metrics) -> dict[str, Any]:
    return {
        "calls": metrics.calls,
        "processed": metrics.processed,
        "dead_letter": metrics.dead_letter,
        "co_failed": metrics.co_failed,
        "busy_ms": pytest.approx(metrics.busy_ms, rel=1e-6),
        "fits_limit": metrics.fits_limit,
    }


CASES = [
    ("sync", None, 900),
    ("async", None, 900),
    ("stream", "retry_batch", 900),
    ("stream", "bisect", 900),
    ("stream", "report_failures", 900),
    # a full batch of 50 takes 20.25 s: over a 15 s limit every call times out, and bisect splits its way under
    ("stream", "retry_batch", 15),
    ("stream", "bisect", 15),
]


@sqlite_only
@pytest.mark.parametrize(("model", "policy", "limit_s"), CASES, ids=[f"{m}-{p}-{s}s" for m, p, s in CASES])
def test_a_replay_and_a_real_run_agree(store: Store, model: str, policy: str | None, limit_s: float) -> None:
    profile = dataclasses.replace(PROFILE, time_limit_s=limit_s)
    _, invoker = _real_run(store, _handler(profile, model, policy))
    real = invoker.metrics("planned")

    planned = Replay(WORKLOAD, profile, model=model, batch_size=BATCH, policy=policy).run().row()

    assert _counts(planned.metrics) == _counts(real)
    assert planned.metrics.unique == real.unique == N
    if limit_s < 20.25:
        assert not planned.fits_limit and planned.timed_out > 0


@sqlite_only
def test_dedup_and_a_late_redrive_agree(store: Store, clock: VirtualClock) -> None:
    handler = _handler(PROFILE, "stream", "retry_batch", dedup=True)
    app, invoker = _real_run(store, handler)
    clock.advance(timedelta(seconds=PROFILE.dedup.redrive_after_s))  # past the 24 h window
    report = dlq.redrive(store, handler="planned")
    Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    real = invoker.metrics("planned")

    replayed = Replay(WORKLOAD, PROFILE, model="stream", batch_size=BATCH, dedup=True).run()
    replayed.redrive(PROFILE.dedup.redrive_after_s)
    planned = plan_dedup(WORKLOAD, PROFILE, batch_size=BATCH)

    assert (replayed.calls, replayed.processed) == (real.calls, real.processed)
    assert (replayed.dead_letter, replayed.co_failed) == (real.dead_letter, real.co_failed)  # dead again
    assert replayed.keys is not None and replayed.keys.reprocessed == planned.reprocessed_with_retention == 0
    # what the real redrive reports it saved is what the plan says the usual design would reprocess
    assert report.would_reprocess_without_retention == planned.reprocessed_without_retention > 0
    assert report.records == planned.redriven_records


@sqlite_only
def test_a_workload_taken_from_the_history_of_past_runs(store: Store) -> None:
    _real_run(store, _handler(PROFILE, "async", None))
    taken = from_store(store, _handler(PROFILE, "async", None))
    assert {entry.record: entry.outcome.value for entry in taken.records} == TABLE
    assert [entry.record for entry in taken.records] == list(TABLE)


@sqlite_only
def test_a_stream_s_history_names_its_poison_and_every_record_of_a_whole_batch(store: Store) -> None:
    _real_run(store, _handler(PROFILE, "stream", "retry_batch"))
    taken = {entry.record: entry.outcome for entry in from_store(store, _handler(PROFILE, "stream", None)).records}
    assert sorted(taken) == sorted(TABLE)  # retry_batch keeps every record of a batch in its payload
    assert {r for r, o in taken.items() if o is Outcome.POISON} == {r for r, o in TABLE.items() if o == "poison"}
    # a batch that passed on a later attempt cannot say which of its records were the transient ones, and
    # a dead batch names only what failed in its last attempt: its transients, passed by then, read as ok
    dead_batches = {(r - 1) // BATCH for r, o in TABLE.items() if o == "poison"}
    transient = {r for r, o in TABLE.items() if o == "transient" and (r - 1) // BATCH not in dead_batches}
    assert transient <= {r for r, o in taken.items() if o is Outcome.TRANSIENT}
    assert all(taken[r] is Outcome.OK for r, o in TABLE.items() if o == "ok" and (r - 1) // BATCH in dead_batches)
