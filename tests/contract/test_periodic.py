"""Periodic functions (``@app.every``, ``@app.cron``) on each backend, on a virtual clock.

Each planned time is one work item keyed by that time, however many schedulers fire it; the catch-up
policy decides what fires after downtime; a worker calls the function with the planned time (never
"now") and keeps what it returns; a function that raises is retried, then dead-lettered.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from vardiya.app import App
from vardiya.clock import VirtualClock
from vardiya.schedule import CatchUpPolicy
from vardiya.schedule.plan import planned_key
from vardiya.service.scheduler import Scheduler
from vardiya.service.worker import Worker, WorkerSettings
from vardiya.store import ItemState, Store, open_store

from ..support.schedulers import at, step_together

DAY1 = datetime(2026, 12, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
ISTANBUL = ZoneInfo("Europe/Istanbul")


def keys(store: Store, kind: str) -> list[str]:
    return sorted(item.key for item in store.items.list(kind=kind, limit=100_000))


def every_five(calls: list[datetime], policy: CatchUpPolicy | None = None) -> App:
    app = App("periodic-contract")

    @app.every(timedelta(minutes=5), downtime=policy)
    def refresh(planned_at: datetime) -> dict[str, str]:
        calls.append(planned_at)
        return {"for": planned_at.isoformat()}

    return app


def test_every_fires_each_planned_time_once_and_the_worker_runs_it_for_that_time(store: Store, clock: VirtualClock) -> None:
    calls: list[datetime] = []
    app = every_five(calls)
    at(clock, DAY1 + MINUTE * 7)
    scheduler = Scheduler(store, app)
    first = scheduler.step()
    # a first start fires the latest planned time (the catch-up default), not the ones before it
    assert [firing.key for firing in first.fired] == [planned_key(DAY1 + MINUTE * 5)]
    for minute in range(8, 31):
        at(clock, DAY1 + MINUTE * minute)
        scheduler.step()
        scheduler.step()  # the same instant again: nothing new
    expected = [planned_key(DAY1 + MINUTE * minute) for minute in range(5, 31, 5)]
    assert keys(store, "periodic:refresh") == expected
    at(clock, DAY1 + MINUTE * 31)
    report = Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    assert report.periodic_runs == 6 and report.succeeded == 6
    assert sorted(calls) == [DAY1 + MINUTE * minute for minute in range(5, 31, 5)]
    item = store.items.find("periodic:refresh", planned_key(DAY1 + MINUTE * 10))
    assert item is not None and item.state is ItemState.SUCCEEDED
    assert item.result == {"for": (DAY1 + MINUTE * 10).isoformat()}
    state = store.schedules.get("periodic:refresh")
    assert state is not None and state.fired == 6 and state.skipped == 0


def test_two_schedulers_on_two_connections_enqueue_each_planned_time_once(store_url: str, clock: VirtualClock) -> None:
    app = every_five([])
    stores = [open_store(store_url, clock=clock) for _ in range(2)]
    try:
        schedulers = [Scheduler(one, app, owner=f"s{n}") for n, one in enumerate(stores)]
        fired: list[str] = []
        for minute in range(0, 61, 5):
            at(clock, DAY1 + MINUTE * minute + timedelta(seconds=1))
            fired.extend(step_together(schedulers))
        expected = [planned_key(DAY1 + MINUTE * minute) for minute in range(0, 61, 5)]
        assert sorted(fired) == expected  # each new item reported by exactly one scheduler
        assert keys(stores[0], "periodic:refresh") == expected
    finally:
        for one in stores:
            one.close()


def test_after_downtime_the_catch_up_policy_decides_once(store: Store, clock: VirtualClock) -> None:
    app = every_five([], CatchUpPolicy(max_ticks=2, grace=timedelta(0)))
    at(clock, DAY1 + MINUTE * 5)
    Scheduler(store, app).step()
    at(clock, DAY1 + MINUTE * 62)  # every scheduler down from 00:05 to 01:02: 00:10 .. 01:00 missed
    first, second = Scheduler(store, app), Scheduler(store, app)
    step = first.step()
    assert [firing.key for firing in step.fired] == [planned_key(DAY1 + MINUTE * 55), planned_key(DAY1 + MINUTE * 60)]
    assert step.skipped == {"periodic:refresh": 9}
    assert second.step().fired == []
    state = store.schedules.get("periodic:refresh")
    assert state is not None and (state.fired, state.skipped) == (3, 9)


def test_cron_in_a_zone_fires_at_its_local_times_and_passes_the_planned_time_in_that_zone(
    store: Store, clock: VirtualClock
) -> None:
    app = App("periodic-cron")
    seen: list[datetime] = []

    @app.cron("0 9 * * *", tz="Europe/Istanbul")
    def digest(planned_at: datetime) -> None:
        seen.append(planned_at)

    at(clock, DAY1 + timedelta(hours=7))  # 10:00 in Istanbul: today's 09:00 (06:00 UTC) is the latest
    scheduler = Scheduler(store, app)
    scheduler.step()
    at(clock, DAY1 + timedelta(days=1, hours=6))
    scheduler.step()
    assert keys(store, "periodic:digest") == [
        planned_key(DAY1 + timedelta(hours=6)), planned_key(DAY1 + timedelta(days=1, hours=6))
    ]
    Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    assert [moment.hour for moment in seen] == [9, 9]
    assert all(moment.tzinfo == ISTANBUL for moment in seen)


def test_a_function_without_arguments_that_raises_is_retried_then_dead(store: Store, clock: VirtualClock) -> None:
    app = App("periodic-failing")
    attempts: list[int] = []

    @app.every(timedelta(hours=1), max_attempts=2)
    def flaky() -> None:
        attempts.append(1)
        raise RuntimeError("the rates service said 503")

    at(clock, DAY1 + timedelta(hours=1, minutes=1))
    Scheduler(store, app).step()
    report = Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    assert len(attempts) == 2 and (report.retried, report.dead) == (1, 1)
    item = store.items.find("periodic:flaky", planned_key(DAY1 + timedelta(hours=1)))
    assert item is not None and item.state is ItemState.DEAD
    assert item.last_error is not None and "RuntimeError: the rates service said 503" in item.last_error
