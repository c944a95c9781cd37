"""The tick runner against a real store: planned-time identity, compensation runs, backlog, deadline."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vardiya.clock import VirtualClock
from vardiya.errors import InvalidInput
from vardiya.slots import SlotScheme
from vardiya.slots.job import SchemeChange, SlotJob
from vardiya.slots.runner import Cut, replay, run_tick
from vardiya.slots.sources import IterableSource
from vardiya.store import LedgerStatus, Store

IDS = list(range(1, 481))


class Recorder:
    """A handler that records every (period, record) it ran, and can fail or slow down on purpose."""

    def __init__(self, clock: VirtualClock | None = None, fail_first: frozenset[int] = frozenset(), step_s: float = 0) -> None:
        self.calls: Counter[tuple[str, int]] = Counter()
        self.failed_once: set[tuple[str, int]] = set()
        self.slots: list[int] = []
        self.clock = clock
        self.fail_first = fail_first
        self.step_s = step_s

    def __call__(self, record: int, context) -> None:  # type: ignore[no-untyped-def]
        self.calls[(context.period.key, record)] += 1
        self.slots.append(context.slot)
        if self.clock is not None and self.step_s:
            self.clock.advance(self.step_s)
        if record in self.fail_first and (context.period.key, record) not in self.failed_once:
            self.failed_once.add((context.period.key, record))
            raise RuntimeError(f"record {record} fails its first attempt")


def _job(handler, scheme: SlotScheme, ids=IDS, **settings) -> SlotJob:  # type: ignore[no-untyped-def]
    return SlotJob(name="job", scheme=scheme, source=IterableSource(ids), handler=handler, **settings)


def test_tick_planned_at_1459_keeps_slot_14_while_running_past_15(store: Store, clock: VirtualClock) -> None:
    handler = Recorder(clock=clock, step_s=0.5)  # 20 records x 0.5 s: the tick runs past 15:00
    # ... within its grace: without one, no record of slot 14 would start after 15:00
    job = _job(handler, SlotScheme(slots=24), backfill_limit=0, deadline=timedelta(hours=2), deadline_grace=timedelta(minutes=1))
    planned = datetime(2026, 12, 1, 14, 59, 59, tzinfo=UTC)
    clock.set(planned)
    report = run_tick(store, job, planned)
    assert clock.now() > datetime(2026, 12, 1, 15, 0, tzinfo=UTC)
    assert report.slot == 14
    assert set(handler.slots) == {14}
    assert report.done == report.started == len([i for i in IDS if i % 24 == 14])


def test_tick_planned_for_15_that_starts_at_1602_processes_slot_15(store: Store, clock: VirtualClock) -> None:
    handler = Recorder()
    job = _job(handler, SlotScheme(slots=24), backfill_limit=0, deadline_grace=timedelta(hours=1))
    clock.set(datetime(2026, 12, 1, 16, 2, tzinfo=UTC))
    report = run_tick(store, job, datetime(2026, 12, 1, 15, 0, tzinfo=UTC))
    assert report.slot == 15 and set(handler.slots) == {15}
    assert report.lateness_s == 62 * 60


def test_second_run_in_a_slot_is_a_compensation_run(store: Store, clock: VirtualClock) -> None:
    failing = frozenset(i for i in IDS if i % 24 == 3 and i % 5 == 0)
    handler = Recorder(fail_first=failing)
    job = _job(handler, SlotScheme(slots=24), runs_per_slot=2, offsets=(timedelta(minutes=1), timedelta(minutes=31)), backfill_limit=0)
    first = run_tick(store, job, datetime(2026, 12, 1, 3, 1, tzinfo=UTC))
    slot_size = len([i for i in IDS if i % 24 == 3])
    assert (first.started, first.done, first.failed) == (slot_size, slot_size - len(failing), len(failing))
    handler.calls.clear()
    second = run_tick(store, job, datetime(2026, 12, 1, 3, 31, tzinfo=UTC))
    assert {record for _, record in handler.calls} == set(failing)
    assert (second.started, second.already_done, second.done, second.failed) == (
        len(failing), slot_size - len(failing), len(failing), 0
    )
    third = run_tick(store, job, datetime(2026, 12, 1, 3, 45, tzinfo=UTC))
    assert (third.started, third.done) == (0, 0)
    row = store.ledger.get("job", sorted(failing)[0], "2026-12-01")
    assert row is not None and row.status is LedgerStatus.DONE and row.attempts == 2


def test_a_record_is_given_up_after_max_attempts_in_a_period(store: Store) -> None:
    def poison(record: int) -> None:
        if record == 27:
            raise ValueError("bad record")

    job = _job(poison, SlotScheme(slots=24), max_attempts=2, backfill_limit=0)
    for minute in (1, 11, 21, 31):
        run_tick(store, job, datetime(2026, 12, 1, 3, minute, tzinfo=UTC))
    row = store.ledger.get("job", 27, "2026-12-01")
    assert row is not None and row.status is LedgerStatus.FAILED and row.attempts == 2
    assert "bad record" in (row.error or "")


def test_missed_slots_are_recovered_within_backfill_limit_current_slot_first(store: Store, clock: VirtualClock) -> None:
    handler = Recorder()
    job = _job(handler, SlotScheme(slots=24), backfill_limit=30)
    # The app was down from 00:00 to 05:00: slots 0..4 never ran. The 05:01 tick starts with its own slot.
    report = run_tick(store, job, datetime(2026, 12, 1, 5, 1, tzinfo=UTC))
    per_slot = len(IDS) // 24
    assert handler.slots[:per_slot] == [5] * per_slot
    assert report.started == per_slot and report.backlog == 30
    assert handler.slots[per_slot:] == [0] * 20 + [1] * 10  # oldest first
    recovered = 30
    planned = datetime(2026, 12, 1, 6, 1, tzinfo=UTC)
    while recovered < 5 * per_slot:
        tick = run_tick(store, job, planned)
        assert tick.backlog <= 30
        recovered += tick.backlog
        planned += timedelta(hours=1)
    assert all(count == 1 for count in handler.calls.values())
    assert len(handler.calls) == 5 * per_slot + per_slot + (planned.hour - 6) * per_slot


def test_deadline_stops_starting_new_records(store: Store, clock: VirtualClock) -> None:
    handler = Recorder(clock=clock, step_s=60)
    slot_seven = [i for i in IDS if i % 24 == 7]
    job = _job(handler, SlotScheme(slots=24), slot_seven, deadline=timedelta(minutes=10), backfill_limit=100)
    planned = datetime(2026, 12, 1, 7, 0, tzinfo=UTC)
    clock.set(planned)
    report = run_tick(store, job, planned)
    assert report.cut is Cut.DEADLINE
    assert report.done == 10  # one record a minute, no start at or after 07:10
    handler.step_s = 0
    clock.set(datetime(2026, 12, 1, 8, 0, tzinfo=UTC))
    later = run_tick(store, job, datetime(2026, 12, 1, 8, 0, tzinfo=UTC))
    assert later.backlog == 10  # the rest of slot 7 is picked up by the next tick
    assert later.backlog_slots == [("2026-12-01", 7)]
    assert sorted(record for _, record in handler.calls) == slot_seven
    assert all(count == 1 for count in handler.calls.values())


def test_a_new_job_does_not_backfill_the_period_before_it_existed(store: Store) -> None:
    handler = Recorder()
    job = _job(handler, SlotScheme(slots=24), catch_up=1, backfill_limit=10_000)
    run_tick(store, job, datetime(2026, 12, 1, 0, 1, tzinfo=UTC))
    assert {period for period, _ in handler.calls} == {"2026-12-01"}


def test_catch_up_recovers_the_previous_period(store: Store) -> None:
    handler = Recorder()
    job = _job(handler, SlotScheme(slots=24), catch_up=1, backfill_limit=10_000, start=datetime(2026, 11, 30, tzinfo=UTC))
    report = run_tick(store, job, datetime(2026, 12, 1, 0, 1, tzinfo=UTC))
    assert report.backlog == len(IDS)
    assert Counter(period for period, _ in handler.calls) == {"2026-11-30": len(IDS), "2026-12-01": len(IDS) // 24}


def test_naive_planned_time_is_refused(store: Store) -> None:
    job = _job(Recorder(), SlotScheme(slots=24))
    with pytest.raises(InvalidInput, match="no time zone"):
        run_tick(store, job, datetime(2026, 12, 1, 15, 0))


def _exactly_once(
    store: Store, job: SlotJob, handler: Recorder, start: datetime, end: datetime, clock: VirtualClock, ids=IDS
) -> list[str]:  # type: ignore[no-untyped-def]
    report = replay(store, job, start, end, clock=clock)
    periods = sorted({tick.period for tick in report.ticks})
    # Only whole periods inside the range must be complete; count them from the ledger.
    complete = [p for p in periods if store.ledger.counts(job.name, p)[LedgerStatus.DONE] == len(ids)]
    for period in complete:
        for record in ids:
            assert handler.calls[(period, record)] == 1, (period, record)
    assert all(count == 1 for count in handler.calls.values())
    return complete


# Three days from the day before a DST change (New York and Lord Howe, whose shift is 30 minutes), both
# directions, and two zones without DST that year.
ZONE_DAYS = [
    ("America/New_York", datetime(2026, 3, 7)),
    ("America/New_York", datetime(2026, 10, 31)),
    ("Australia/Lord_Howe", datetime(2026, 4, 4)),
    ("Australia/Lord_Howe", datetime(2026, 10, 3)),
    ("Europe/Istanbul", datetime(2026, 3, 28)),
    ("UTC", datetime(2026, 3, 28)),
]


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize(("zone", "day"), ZONE_DAYS, ids=[f"{z}-{d:%m-%d}" for z, d in ZONE_DAYS])
@pytest.mark.parametrize("assign", ["mod", "hash"])
@pytest.mark.parametrize(("slots", "layout"), [(1, "sequential"), (24, "sequential"), (48, "sequential"), (48, "nested")])
def test_every_record_exactly_once_per_period_across_dst(
    store: Store, zone: str, day: datetime, assign: str, slots: int, layout: str
) -> None:
    handler = Recorder()
    scheme = SlotScheme(slots=slots, tz=zone, assign=assign, layout=layout)
    start = day.replace(tzinfo=ZoneInfo(zone))
    clock = VirtualClock(start)
    # Backlog only within the period: the guarantee is per period, and a slot lost to spring forward
    # must be recovered by a later tick of the same day.
    job = _job(handler, scheme, IDS[:240], catch_up=0, backfill_limit=10_000, start=start)
    complete = _exactly_once(store, job, handler, start, start + timedelta(days=3), clock, ids=IDS[:240])
    assert complete == [f"{start + timedelta(days=n):%Y-%m-%d}" for n in range(3)]


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize("assign", ["mod", "hash"])
@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_weekly_job_with_seven_slots(store: Store, assign: str, zone: str) -> None:
    handler = Recorder()
    scheme = SlotScheme(slots=7, period=timedelta(days=7), tz=zone, assign=assign)
    start = datetime(2026, 2, 26, tzinfo=UTC)  # epoch-aligned weeks start on Thursdays
    clock = VirtualClock(start)
    job = _job(handler, scheme, catch_up=0, backfill_limit=10_000, start=start)
    complete = _exactly_once(store, job, handler, start, start + timedelta(days=21), clock)
    assert len(complete) == 3


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (SlotScheme(slots=24), SlotScheme(slots=48, layout="nested")),
        (SlotScheme(slots=24), SlotScheme(slots=48)),
        (SlotScheme(slots=24), SlotScheme(slots=24, assign="hash")),
    ],
    ids=["24-48-nested", "24-48-sequential", "mod-hash"],
)
def test_scheme_change_at_a_period_boundary_has_no_duplicate_and_no_gap(
    store: Store, before: SlotScheme, after: SlotScheme
) -> None:
    handler = Recorder()
    switch = datetime(2026, 12, 2, tzinfo=UTC)
    start = datetime(2026, 12, 1, tzinfo=UTC)
    job = _job(
        handler, before, catch_up=0, backfill_limit=10_000, start=start,
        scheme_changes=(SchemeChange(effective_from=switch, scheme=after),),
    )
    clock = VirtualClock(start)
    complete = _exactly_once(store, job, handler, start, start + timedelta(days=3), clock)
    assert complete == ["2026-12-01", "2026-12-02", "2026-12-03"]
    assert job.scheme_at(switch) == after and job.scheme_at(switch - timedelta(seconds=1)) == before


def test_scheme_change_inside_a_period_is_refused() -> None:
    from vardiya.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="period boundary"):
        _job(
            Recorder(), SlotScheme(slots=24),
            scheme_changes=(SchemeChange(effective_from=datetime(2026, 12, 2, 5, tzinfo=UTC), scheme=SlotScheme(slots=48)),),
        )


ZONES_ALL = ["UTC", "Europe/Istanbul", "America/New_York", "Australia/Lord_Howe"]
DST_DAYS = [datetime(2026, 3, 8), datetime(2026, 11, 1), datetime(2026, 4, 5), datetime(2026, 10, 4), datetime(2026, 3, 29)]


@pytest.mark.parametrize("backend", ["sqlite"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    zone=st.sampled_from(ZONES_ALL),
    day=st.one_of(st.sampled_from(DST_DAYS), st.dates(min_value=date(2026, 1, 1), max_value=date(2026, 12, 30)).map(
        lambda d: datetime(d.year, d.month, d.day)
    )),
    shape=st.sampled_from([(1, "sequential"), (24, "sequential"), (48, "sequential"), (48, "nested")]),
    assign=st.sampled_from(["mod", "hash"]),
    ids=st.lists(st.integers(min_value=-10_000, max_value=10_000), min_size=1, max_size=120, unique=True),
)
def test_exactly_once_per_period_for_any_zone_day_and_ids(
    store_url: str, zone: str, day: datetime, shape: tuple[int, str], assign: str, ids: list[int]
) -> None:
    from vardiya.store import open_store

    slots, layout = shape
    start = (day - timedelta(days=1)).replace(tzinfo=ZoneInfo(zone))
    clock = VirtualClock(start)
    handler = Recorder()
    with open_store(store_url, clock=clock) as fresh:
        fresh.ledger.reset("job", f"{start:%Y-%m-%d}")
        job = SlotJob(
            name=f"job-{len(ids)}-{zone.replace('/', '_')}-{day:%m%d}-{slots}-{layout}-{assign}",
            scheme=SlotScheme(slots=slots, tz=zone, assign=assign, layout=layout),
            source=IterableSource(ids), handler=handler, catch_up=0, backfill_limit=10_000, start=start,
        )
        report = replay(fresh, job, start, start + timedelta(days=3), clock=clock)
        periods = sorted({tick.period for tick in report.ticks})
        assert periods == [f"{start + timedelta(days=n):%Y-%m-%d}" for n in range(3)]
        for period in periods:
            assert fresh.ledger.counts(job.name, period)[LedgerStatus.DONE] == len(ids)
            for record in ids:
                assert handler.calls[(period, record)] == 1


def test_the_seed_step_with_its_own_run_times_runs_every_record_once_a_period_across_the_switch(store: Store) -> None:
    """24 slots run at :01 and :31, then 48 slots run once at :01 of each half hour (slot = hour*2 + half).

    Some records fail their first attempt on each day, so the :31 compensation run of day one and the
    next slot's backlog of day two have work; still every record is processed exactly once a period.
    """
    # Not in the last half hour of day two: no later tick of that period could retry them.
    failing = frozenset(i for i in IDS if i % 7 == 0 and i % 48 != 47)
    handler = Recorder(fail_first=failing)
    start, switch = datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC)
    job = _job(
        handler, SlotScheme(slots=24), runs_per_slot=2, offsets=(timedelta(minutes=1), timedelta(minutes=31)),
        catch_up=0, backfill_limit=10_000, start=start,
        scheme_changes=(SchemeChange(
            effective_from=switch, scheme=SlotScheme(slots=48), runs_per_slot=1, offsets=[timedelta(minutes=1)],
        ),),
    )
    report = replay(store, job, start, start + timedelta(days=2), clock=VirtualClock(start))
    per_day = Counter(tick.period for tick in report.ticks)
    assert per_day == {"2026-12-01": 48, "2026-12-02": 48}
    second_day = [tick for tick in report.ticks if tick.period == "2026-12-02"]
    assert [tick.slot for tick in second_day] == list(range(48))
    assert {(tick.planned_at.minute) for tick in second_day} == {1, 31}
    for period in ("2026-12-01", "2026-12-02"):
        assert store.ledger.counts("job", period)[LedgerStatus.DONE] == len(IDS)
        successes = Counter(
            record for (key, record), count in handler.calls.items() if key == period for _ in range(count)
        )
        # Each record ran once, or twice when it failed its first attempt: never a second success.
        assert all(successes[record] == (2 if record in failing else 1) for record in IDS), period
    assert sum(tick.done for tick in report.ticks) == 2 * len(IDS)
