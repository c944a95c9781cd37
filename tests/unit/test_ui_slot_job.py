"""The next ticks a slot job's page lists are the scheduler's: ``TickSchedule.upcoming`` agrees with
``next_after`` (what the scheduler and ``status`` use) tick by tick, across a DST change and a scheme
change, and gives each tick's period and slot in the job's zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from vardiya.schedule.plan import TickSchedule
from vardiya.slots import IterableSource, SlotScheme
from vardiya.slots.job import SchemeChange, SlotJob

NEW_YORK = ZoneInfo("America/New_York")


def _job() -> SlotJob:
    return SlotJob(
        name="meters", scheme=SlotScheme(slots=4, tz="America/New_York"), source=IterableSource(range(8)),
        handler=lambda record: None, runs_per_slot=2,
        scheme_changes=(SchemeChange(effective_from=datetime(2026, 3, 9, tzinfo=NEW_YORK), scheme=SlotScheme(slots=2, tz="America/New_York")),),
    )


def test_upcoming_is_next_after_tick_by_tick_across_dst_and_a_scheme_change() -> None:
    schedule = TickSchedule(_job())
    moment = datetime(2026, 3, 7, 20, 30, tzinfo=NEW_YORK)
    upcoming = schedule.upcoming(moment, 16)
    chained, at = [], moment
    for _ in range(16):
        found = schedule.next_after(at)
        assert found is not None
        chained.append(found)
        at = found
    assert [tick.planned_time.astimezone(UTC) for tick in upcoming] == chained
    # spring forward on 2026-03-08: that day has 23 hours, its 4 windows of 6 wall hours still tick twice
    assert [(tick.period.key, tick.slot) for tick in upcoming[:3]] == [("2026-03-07", 3), ("2026-03-08", 0), ("2026-03-08", 0)]
    assert all(tick.planned_time.tzinfo is not None and tick.planned_time.utcoffset() in (timedelta(hours=-5), timedelta(hours=-4))
               for tick in upcoming)
    # from 2026-03-09 on, two slots of 12 hours
    assert {tick.slot for tick in upcoming if tick.period.key == "2026-03-09"} == {0, 1}
    assert len([tick for tick in upcoming if tick.period.key == "2026-03-09"]) == 4


def test_upcoming_gives_as_many_as_asked_even_past_two_periods() -> None:
    schedule = TickSchedule(_job())
    ticks = schedule.upcoming(datetime(2026, 3, 10, tzinfo=UTC), 30)
    assert len(ticks) == 30 and ticks == sorted(ticks, key=lambda tick: tick.planned_time.astimezone(UTC))
