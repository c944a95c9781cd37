"""The scheduler on each backend, on a virtual clock: exact firing, catch-up, clock steps, many schedulers.

Every planned tick becomes one work item keyed by its planned time, whoever fires it and however often;
the catch-up policy after downtime is applied exactly once and counted; a clock stepping backwards
fires nothing twice and one stepping forwards loses nothing. Workers then run the ticks for real.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vardiya.app import App
from vardiya.clock import VirtualClock
from vardiya.schedule import CatchUpPolicy
from vardiya.schedule.plan import planned_key
from vardiya.service.scheduler import Scheduler
from vardiya.service.worker import Worker, WorkerSettings
from vardiya.slots.runner import planned_ticks
from vardiya.slots.scheme import SlotScheme
from vardiya.slots.sources import IterableSource
from vardiya.store import ItemState, LedgerStatus, Store, open_store

from ..support.schedulers import at, step_together

DAY1 = datetime(2026, 12, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
RECORDS = 240


def hourly_app(policy: CatchUpPolicy | None = None, *, slots: int = 24, catch_up: int = 1, records: int = RECORDS) -> App:
    app = App("scheduler-contract")

    @app.slot_job(
        "hourly", scheme=SlotScheme(slots=slots), source=IterableSource(range(records)), catch_up=catch_up,
        backfill_limit=100_000, downtime=policy or CatchUpPolicy(),
    )
    def handle(record: int) -> None:
        return None

    return app


def tick_keys(store: Store) -> list[str]:
    return sorted(item.key for item in store.items.list(kind="tick:hourly", limit=100_000))


def test_a_new_job_fires_the_latest_tick_of_its_period_then_every_tick_on_time(store: Store, clock: VirtualClock) -> None:
    app = hourly_app()
    at(clock, DAY1 + HOUR * 5 + timedelta(minutes=20))
    scheduler = Scheduler(store, app)
    first = scheduler.step()
    assert [firing.key for firing in first.fired] == [planned_key(DAY1 + HOUR * 5)]
    # Slots 0-4 came before the job's first start: not missed, so not passed by (no "missed ticks"
    # alert on a new store); their records are the 05:00 tick's backlog.
    assert first.skipped == {}
    for hour in range(6, 30):
        at(clock, DAY1 + HOUR * hour)
        step = scheduler.step()
        assert [firing.key for firing in step.fired] == [planned_key(DAY1 + HOUR * hour)]
        assert not step.skipped
        assert scheduler.step().fired == []  # the same instant again: nothing new
    keys = tick_keys(store)
    assert keys == [planned_key(DAY1 + HOUR * hour) for hour in range(5, 30)]
    item = store.items.find("tick:hourly", planned_key(DAY1 + HOUR * 7))
    assert item is not None and item.payload == {"job": "hourly", "planned_at": (DAY1 + HOUR * 7).isoformat()}
    assert item.run_after == DAY1 + HOUR * 7
    state = store.schedules.get("tick:hourly")
    assert state is not None and state.fired == 25 and state.skipped == 0
    assert state.planned_through == DAY1 + HOUR * 29


def test_two_schedulers_on_two_connections_enqueue_each_tick_once(store_url: str, clock: VirtualClock) -> None:
    app = hourly_app()
    stores = [open_store(store_url, clock=clock) for _ in range(2)]
    try:
        schedulers = [Scheduler(one, app, owner=f"s{n}") for n, one in enumerate(stores)]
        fired: list[str] = []
        for hour in range(1, 13):
            at(clock, DAY1 + HOUR * hour)
            fired.extend(step_together(schedulers))
        # the first step of a new job fires the latest due tick (01:00); 00:00 came before its first start,
        # so it is not counted as passed by
        expected = [planned_key(DAY1 + HOUR * hour) for hour in range(1, 13)]
        assert sorted(fired) == expected  # each new item reported by exactly one scheduler
        assert tick_keys(stores[0]) == expected
        state = stores[0].schedules.get("tick:hourly")
        assert state is not None and state.fired == 12 and state.skipped == 0
    finally:
        for one in stores:
            one.close()


def test_downtime_applies_the_policy_once_and_counts_what_it_passes_by(store: Store, clock: VirtualClock) -> None:
    app = hourly_app(CatchUpPolicy(grace=timedelta(minutes=5)))
    at(clock, DAY1 + HOUR)
    Scheduler(store, app).step()
    # Every scheduler is down from 01:00 on day 1 until 03:30 on day 3.
    back = DAY1 + timedelta(days=2, hours=3, minutes=30)
    at(clock, back)
    missed = [planned.astimezone(UTC) for planned in planned_ticks(app.slot_jobs["hourly"], DAY1 + HOUR * 2, back)]
    assert len(missed) == 50
    first, second = Scheduler(store, app), Scheduler(store, app)
    step = first.step()
    assert [firing.key for firing in step.fired] == [planned_key(missed[-1])]
    assert step.skipped == {"tick:hourly": 49}
    assert second.step().fired == []  # the policy was applied once: the second scheduler sees the cursor
    state = store.schedules.get("tick:hourly")
    assert state is not None
    # 0 passed by on day 1 (00:00 came before the job's first start), 49 now; the span is the latest one passed by
    assert (state.skipped, state.skipped_from, state.skipped_to) == (49, missed[0], missed[-2])
    assert len(tick_keys(store)) == 2  # 01:00 on day 1, then the one caught up


def test_max_ticks_and_max_age_after_downtime(store: Store, clock: VirtualClock) -> None:
    app = hourly_app(CatchUpPolicy(max_ticks=3, max_age=timedelta(hours=2), grace=timedelta(0)))
    at(clock, DAY1 + HOUR)
    Scheduler(store, app).step()
    at(clock, DAY1 + HOUR * 10 + timedelta(minutes=30))
    step = Scheduler(store, app).step()
    # 02:00 .. 10:00 were missed; only 09:00 and 10:00 are at most 2 h old
    assert [firing.key for firing in step.fired] == [planned_key(DAY1 + HOUR * 9), planned_key(DAY1 + HOUR * 10)]
    assert step.skipped == {"tick:hourly": 7}


def test_a_clock_stepping_back_fires_nothing_twice(store: Store, clock: VirtualClock) -> None:
    app = hourly_app()
    at(clock, DAY1 + HOUR * 10)
    scheduler = Scheduler(store, app)
    scheduler.step()
    before = tick_keys(store)
    clock.set(DAY1 + HOUR * 7)  # a step backwards: monotonic time does not move
    assert scheduler.step().fired == []
    clock.set(DAY1 + HOUR * 10 + timedelta(minutes=30))
    assert scheduler.step().fired == []
    assert tick_keys(store) == before
    clock.set(DAY1 + HOUR * 11)
    assert [firing.key for firing in scheduler.step().fired] == [planned_key(DAY1 + HOUR * 11)]
    assert len(tick_keys(store)) == len(set(tick_keys(store)))


def test_a_clock_stepping_forwards_loses_no_tick_up_to_max_jump(store: Store, clock: VirtualClock) -> None:
    app = hourly_app(CatchUpPolicy(max_ticks=0, grace=timedelta(0)))  # a missed tick would never fire
    at(clock, DAY1 + HOUR * 10)
    scheduler = Scheduler(store, app, max_jump=timedelta(hours=3))
    scheduler.step()
    clock.set(DAY1 + HOUR * 12 + timedelta(minutes=10))  # a 2 h 10 min step forwards
    step = scheduler.step()
    assert [firing.key for firing in step.fired] == [planned_key(DAY1 + HOUR * 11), planned_key(DAY1 + HOUR * 12)]
    assert not step.skipped
    clock.set(DAY1 + HOUR * 18 + timedelta(minutes=10))  # 6 h: longer than max_jump, treated as downtime
    step = scheduler.step()
    assert step.fired == [] and step.skipped == {"tick:hourly": 6}


def test_workers_run_fired_ticks_for_their_planned_time_and_record_lateness(store: Store, clock: VirtualClock) -> None:
    app = hourly_app()
    at(clock, DAY1 + HOUR * 3 + timedelta(minutes=10))
    scheduler = Scheduler(store, app)
    scheduler.step()
    at(clock, DAY1 + HOUR * 3 + timedelta(minutes=12))
    report = Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    assert report.ticks == 1 and report.succeeded == 1
    item = store.items.find("tick:hourly", planned_key(DAY1 + HOUR * 3))
    assert item is not None and item.state is ItemState.SUCCEEDED
    result = item.result
    assert result["slot"] == 3 and result["planned_at"] == (DAY1 + HOUR * 3).isoformat()
    assert result["lateness_s"] == pytest.approx(12 * 60)
    assert result["done"] == 40  # slot 3 (10 records) and the backlog of slots 0-2
    assert (result["started"], result["backlog"]) == (10, 30)
    assert store.ledger.counts("hourly", "2026-12-01")[LedgerStatus.DONE] == 40


@pytest.mark.parametrize(("catch_up", "day1_done"), [(1, 10), (2, 40)])
def test_after_downtime_the_backlog_recovers_within_catch_up_periods(
    store: Store, clock: VirtualClock, catch_up: int, day1_done: int
) -> None:
    app = hourly_app(slots=4, catch_up=catch_up, records=40)
    scheduler = Scheduler(store, app)
    scheduler.step()  # day 1, 00:00: slot 0 of day 1
    Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    at(clock, DAY1 + timedelta(days=2, hours=12, minutes=30))  # down until day 3, 12:30 (slot 2)
    step = Scheduler(store, app).step()
    assert [firing.key for firing in step.fired] == [planned_key(DAY1 + timedelta(days=2, hours=12))]
    Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    counts = {day: store.ledger.counts("hourly", day)[LedgerStatus.DONE] for day in ("2026-12-01", "2026-12-02", "2026-12-03")}
    assert counts == {"2026-12-01": day1_done, "2026-12-02": 40, "2026-12-03": 30}


def test_status_says_when_no_scheduler_fires_the_ticks_that_are_due(store: Store, clock: VirtualClock) -> None:
    from vardiya.service.status import status_report

    app = hourly_app()
    at(clock, DAY1 + HOUR * 2)
    scheduler = Scheduler(store, app)
    scheduler.step()
    Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    report = status_report(store, app, late_after=timedelta(seconds=60))
    assert (report["behind"], report["healthy"], report["jobs"][0]["behind_s"]) == ([], True, 0.0)
    at(clock, DAY1 + HOUR * 5 + timedelta(minutes=10))  # the scheduler stopped after 02:00
    report = status_report(store, app, late_after=timedelta(seconds=60))
    assert report["behind"] == ["hourly"] and report["healthy"] is False
    assert report["jobs"][0]["behind_s"] == pytest.approx((HOUR * 2 + timedelta(minutes=10)).total_seconds())
    scheduler.step()
    assert status_report(store, app)["behind"] == []
