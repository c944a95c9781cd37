"""Pause, resume, manual runs and heartbeats on each backend (issues 16 and 17), on a virtual clock.

A pause is one stored row that every scheduler and worker honours: two schedulers both fire nothing
for a paused job and its cursor waits; on resume the job's catch-up policy decides the ticks missed
meanwhile, once; a worker leaves a paused handler's items ready with no attempt charged. A manual run is
refused while paused and queued once per key. A service's heartbeat row is alive within three
intervals and gone after a clean stop.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from vardiya.app import App
from vardiya.clock import VirtualClock
from vardiya.errors import InvalidInput
from vardiya.invoke.invoker import Invoker
from vardiya.pipeline import Daily
from vardiya.schedule import CatchUpPolicy, Cron, DataArrival
from vardiya.schedule.plan import planned_key
from vardiya.service.manual import TriggerRefused, manual_run, queue_manual_run
from vardiya.service.scheduler import Scheduler
from vardiya.service.worker import Worker, WorkerSettings
from vardiya.slots.scheme import SlotScheme
from vardiya.slots.sources import IterableSource
from vardiya.store import ItemState, Store, open_store
from vardiya.store.controls import ControlKind
from vardiya.store.heartbeats import ServiceBeat, ServiceKind

from ..support.schedulers import at, step_together

DAY1 = datetime(2026, 12, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def hourly_app(policy: CatchUpPolicy | None = None) -> App:
    app = App("controls-contract")

    @app.slot_job(
        "hourly", scheme=SlotScheme(slots=24), source=IterableSource(range(48)), backfill_limit=100_000,
        downtime=policy or CatchUpPolicy(grace=timedelta(0)),
    )
    def handle(record: int) -> None:
        return None

    @app.handler("emails")
    def send(record: dict[str, str], context: object) -> str:
        return record["to"]

    @app.every(timedelta(minutes=30))
    def rates(planned_at: datetime) -> str:
        return planned_at.isoformat()

    return app


def tick_keys(store: Store) -> list[str]:
    return sorted(item.key for item in store.items.list(kind="tick:hourly", limit=10_000))


def test_pause_and_resume_are_stored_once_and_say_when_nothing_changed(store: Store, clock: VirtualClock) -> None:
    first = store.controls.pause(ControlKind.SLOT_JOB, "hourly", reason="source migration")
    assert first.changed and first.pause is not None and first.pause.paused_at == clock.now()
    clock.advance(60)
    again = store.controls.pause(ControlKind.SLOT_JOB, "hourly", reason="another reason")
    assert not again.changed and again.pause is not None
    assert (again.pause.reason, again.pause.paused_at) == ("source migration", DAY1)  # the first pause is kept
    store.controls.pause(ControlKind.HANDLER, "hourly")  # the same name, another kind: its own row
    assert [(p.kind, p.name) for p in store.controls.paused()] == [
        (ControlKind.HANDLER, "hourly"), (ControlKind.SLOT_JOB, "hourly")
    ]
    assert [p.kind for p in store.controls.paused(ControlKind.HANDLER)] == [ControlKind.HANDLER]
    ended = store.controls.resume(ControlKind.SLOT_JOB, "hourly")
    assert ended.changed and ended.pause is not None and ended.pause.reason == "source migration"
    assert not store.controls.resume(ControlKind.SLOT_JOB, "hourly").changed
    assert store.controls.get(ControlKind.SLOT_JOB, "hourly") is None
    for bad in ("", "x" * 501, "nul\x00", "line\nbreak"):
        with pytest.raises(InvalidInput):
            store.controls.pause(ControlKind.HANDLER, bad)
    with pytest.raises(InvalidInput):
        store.controls.pause(ControlKind.HANDLER, "emails", reason="r" * 501)
    assert len(store.controls.paused()) == 1  # the bad ones wrote nothing


def test_two_schedulers_both_honour_a_pause_and_resume_goes_to_the_catch_up_policy(
    store_url: str, clock: VirtualClock
) -> None:
    app = hourly_app(CatchUpPolicy(max_ticks=1, grace=timedelta(0)))
    stores = [open_store(store_url, clock=clock) for _ in range(2)]
    try:
        schedulers = [Scheduler(one, app, owner=f"s{n}", only=["hourly"]) for n, one in enumerate(stores)]
        at(clock, DAY1 + HOUR * 2)
        assert sorted(step_together(schedulers)) == [planned_key(DAY1 + HOUR * 2)]
        stores[0].controls.pause(ControlKind.SLOT_JOB, "hourly", reason="maintenance")
        for hour in range(3, 8):
            at(clock, DAY1 + HOUR * hour)
            assert step_together(schedulers) == []  # neither fires while paused
        state = stores[0].schedules.get("tick:hourly")
        assert state is not None and state.planned_through == DAY1 + HOUR * 2  # the cursor waited
        assert state.skipped == 0  # nothing was passed by while paused
        at(clock, DAY1 + HOUR * 7 + timedelta(minutes=10))
        stores[1].controls.resume(ControlKind.SLOT_JOB, "hourly")
        fired = step_together(schedulers)
        # The ticks of 03:00..07:00 came while paused: missed, so the policy fires the latest only.
        assert fired == [planned_key(DAY1 + HOUR * 7)]
        state = stores[0].schedules.get("tick:hourly")
        assert state is not None and state.skipped == 4 and state.skipped_from == DAY1 + HOUR * 3
        at(clock, DAY1 + HOUR * 8)
        assert len(step_together(schedulers)) == 1  # on time again
        assert tick_keys(stores[0]) == [planned_key(DAY1 + HOUR * hour) for hour in (2, 7, 8)]
    finally:
        for one in stores:
            one.close()


def test_a_pause_shorter_than_the_grace_loses_no_tick(store: Store, clock: VirtualClock) -> None:
    app = hourly_app(CatchUpPolicy(max_ticks=1, grace=timedelta(hours=3)))
    scheduler = Scheduler(store, app, only=["hourly"])
    at(clock, DAY1 + HOUR)
    scheduler.step()
    store.controls.pause(ControlKind.SLOT_JOB, "hourly")
    at(clock, DAY1 + HOUR * 3)
    assert scheduler.step().fired == []
    store.controls.resume(ControlKind.SLOT_JOB, "hourly")
    assert [firing.key for firing in scheduler.step().fired] == [planned_key(DAY1 + HOUR * 2), planned_key(DAY1 + HOUR * 3)]


def test_a_paused_periodic_function_fires_nothing(store: Store, clock: VirtualClock) -> None:
    app = hourly_app()
    store.controls.pause(ControlKind.PERIODIC, "rates")
    scheduler = Scheduler(store, app)
    at(clock, DAY1 + HOUR * 2)
    fired = [firing.kind for firing in scheduler.step().fired]
    assert fired == ["tick:hourly"]  # the job fires, the paused function does not
    assert store.schedules.get("periodic:rates") is None


def test_a_worker_leaves_a_paused_handlers_items_ready_and_runs_them_after_resume(store: Store) -> None:
    app = hourly_app()
    Invoker(store, app).submit("emails", {"to": "a@example.com"}, key="one")
    store.controls.pause(ControlKind.HANDLER, "emails")
    report = Worker(store, app, WorkerSettings(names=("emails",), heartbeat=False)).run(until_idle=True)
    assert report.items == 0
    [item] = store.items.list(kind="call:emails")
    assert (item.state, item.attempts) == (ItemState.PENDING, 0)
    store.controls.resume(ControlKind.HANDLER, "emails")
    report = Worker(store, app, WorkerSettings(names=("emails",), heartbeat=False)).run(until_idle=True)
    assert report.succeeded == 1
    [item] = store.items.list(kind="call:emails")
    assert item.state is ItemState.SUCCEEDED


def test_a_claim_that_excludes_kinds_leaves_them(store: Store) -> None:
    store.items.enqueue("call:a", None, key="1")
    store.items.enqueue("call:b", None, key="1")
    claimed = store.items.claim(10, owner="w", lease=30, kinds=["call:a", "call:b"], exclude={"call:a"})
    assert [item.kind for item in claimed] == ["call:b"]
    assert store.items.claim(10, owner="w", lease=30, kinds=["call:a"], exclude={"call:a"}) == []
    with pytest.raises(InvalidInput):
        store.items.claim(10, owner="w", lease=30, exclude={"call:a"})
    item = store.items.find("call:a", "1")
    assert item is not None and item.state is ItemState.PENDING


def test_a_manual_run_is_refused_while_paused_and_queued_once(store: Store, clock: VirtualClock) -> None:
    app = hourly_app()
    run = manual_run(app, ControlKind.PERIODIC, "rates", "2026-12-01T06:00:00Z", clock.now())
    store.controls.pause(ControlKind.PERIODIC, "rates")
    with pytest.raises(TriggerRefused, match="resume it first"):
        queue_manual_run(store, run)
    assert store.items.list(kind="periodic:rates") == []
    store.controls.resume(ControlKind.PERIODIC, "rates")
    first = queue_manual_run(store, run)
    second = queue_manual_run(store, run)
    assert first.new and not second.new
    assert first.item is not None and second.item is not None and first.item.id == second.item.id
    assert first.item.payload == {"periodic": "rates", "planned_at": "2026-12-01T06:00:00+00:00"}
    report = Worker(store, app, WorkerSettings(names=("emails", "rates"), heartbeat=False)).run(until_idle=True)
    assert report.periodic_runs == 1
    done = store.items.get(first.item.id)
    assert done is not None and done.state is ItemState.SUCCEEDED and done.result == "2026-12-01T06:00:00+00:00"


def test_a_manual_tick_is_the_tick_of_the_slot_holding_the_time(store: Store, clock: VirtualClock) -> None:
    app = hourly_app()
    run = manual_run(app, ControlKind.SLOT_JOB, "hourly", "2026-12-01T05:40:00+00:00", clock.now())
    assert run.kind == "tick:hourly" and run.key == f"manual@{planned_key(DAY1 + HOUR * 5)}"
    assert run.payload == {"job": "hourly", "planned_at": (DAY1 + HOUR * 5).isoformat()}
    with pytest.raises(InvalidInput):
        manual_run(app, ControlKind.HANDLER, "emails", None, clock.now())
    with pytest.raises(InvalidInput):
        manual_run(app, ControlKind.SLOT_JOB, "hourly", "half past five", clock.now())


def test_heartbeats_are_alive_within_three_intervals_and_gone_after_a_clean_stop(
    store: Store, clock: VirtualClock
) -> None:
    beat = ServiceBeat(store, "worker-1", ServiceKind.WORKER, interval_s=10, app="shop", runs=["call:emails"])
    beat.start()
    [row] = store.heartbeats.all()
    assert (row.kind, row.app, row.runs, row.alive, row.started_at) == (
        ServiceKind.WORKER, "shop", ("call:emails",), True, DAY1
    )
    clock.advance(5)
    beat.beat()  # within the interval: nothing written
    assert store.heartbeats.all()[0].beat_at == DAY1
    clock.advance(5)
    beat.beat()
    assert store.heartbeats.all()[0].beat_at == DAY1 + timedelta(seconds=10)
    clock.advance(30)
    assert store.heartbeats.alive()[0].id == "worker-1"  # 30 s = three intervals: still alive
    clock.advance(1)
    assert store.heartbeats.alive() == [] and store.heartbeats.all()[0].alive is False
    other = ServiceBeat(store, "scheduler-1", ServiceKind.SCHEDULER, interval_s=5, app="shop", runs=["tick:hourly"])
    other.start()
    assert [service.id for service in store.heartbeats.alive()] == ["scheduler-1"]
    beat.stop()
    assert [service.id for service in store.heartbeats.all()] == ["scheduler-1"]
    clock.advance(timedelta(days=8))
    ServiceBeat(store, "worker-2", ServiceKind.WORKER, interval_s=10, app=None, runs=[]).start()
    assert [service.id for service in store.heartbeats.all()] == ["worker-2"]  # a week-dead row is dropped
    with pytest.raises(ValueError, match="interval"):
        ServiceBeat(store, "bad", ServiceKind.WORKER, interval_s=0, app=None, runs=[])


def test_a_scheduler_and_a_worker_beat_while_running_and_remove_their_rows(store: Store, clock: VirtualClock) -> None:
    app = hourly_app()
    at(clock, DAY1 + HOUR)
    scheduler = Scheduler(store, app, owner="sched-a")
    seen: list[list[str]] = []
    original = scheduler.step

    def step() -> object:
        seen.append([service.id for service in store.heartbeats.alive()])
        return original()

    scheduler.step = step  # type: ignore[method-assign]
    scheduler.run(steps=2)
    assert seen == [["sched-a"], ["sched-a"]]
    assert store.heartbeats.all() == []
    Worker(store, app, WorkerSettings(owner="work-a", heartbeat=False)).run(until_idle=True)
    assert store.heartbeats.all() == []


def test_status_shows_what_is_paused_and_the_services_alive(store: Store, clock: VirtualClock) -> None:
    from vardiya.service.status import status_report

    app = hourly_app()
    ServiceBeat(store, "worker-9", ServiceKind.WORKER, interval_s=10, app="shop", runs=["call:emails"]).start()
    store.controls.pause(ControlKind.SLOT_JOB, "hourly", reason="migration")
    at(clock, DAY1 + HOUR * 6)  # hours of ticks not fired: a paused job is not behind
    document = status_report(store, app)
    assert [(p["kind"], p["name"], p["reason"]) for p in document["paused"]] == [("slot_job", "hourly", "migration")]
    assert document["jobs"][0]["paused"] is True and document["behind"] == []
    assert [(s["id"], s["kind"], s["alive"]) for s in document["services"]] == [("worker-9", "worker", False)]
    assert document["services_alive"] == 0
    store.controls.resume(ControlKind.SLOT_JOB, "hourly")
    ServiceBeat(store, "worker-9", ServiceKind.WORKER, interval_s=10, app="shop", runs=["call:emails"]).start()
    document = status_report(store, app)
    assert document["jobs"][0]["paused"] is False and document["paused"] == []
    assert document["services_alive"] == 1


def test_a_paused_trigger_or_pipeline_fires_nothing_and_its_sensor_is_not_checked(
    store: Store, clock: VirtualClock, tmp_path: Path
) -> None:
    from .test_triggers import landing_pipeline, write_rows

    landing = tmp_path / "landing"
    app = App("paused-triggers")
    days = Daily(start="2026-12-01", end="2026-12-02")
    app.add_pipeline(
        landing_pipeline("eager", landing, days), root=tmp_path / "out",
        triggers=[Cron(expr="0 6 * * *", lag=0, name="six")],
    )
    app.add_pipeline(
        landing_pipeline("patient", landing, days), root=tmp_path / "out",
        triggers=[DataArrival(path=str(landing / "{partition}.csv"), every=60, name="landed")],
    )
    store.controls.pause(ControlKind.TRIGGER, "eager:six")
    store.controls.pause(ControlKind.PIPELINE, "patient")
    scheduler = Scheduler(store, app)
    scheduler.step()
    write_rows(landing / "2026-12-01.csv", 3)
    at(clock, DAY1 + timedelta(hours=6))
    assert scheduler.step().fired == []  # neither the paused trigger nor the paused pipeline's sensor
    store.controls.resume(ControlKind.PIPELINE, "patient")
    at(clock, DAY1 + timedelta(hours=6, minutes=2))
    assert [firing.key for firing in scheduler.step().fired] == ["landed:2026-12-01"]
    store.controls.resume(ControlKind.TRIGGER, "eager:six")
    # 06:00 came while paused: missed; the default policy fires the latest missed time, once
    assert [firing.key.split("@")[0] for firing in scheduler.step().fired] == ["six"]
