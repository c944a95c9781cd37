"""When a period is closed for good: one rule for the backlog and for the not-done reports. Pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vardiya.slots import IterableSource, SlotJob, SlotScheme
from vardiya.slots.closed import closed_periods

DAY = datetime(2026, 12, 1, tzinfo=UTC)


def _job(**settings) -> SlotJob:  # type: ignore[no-untyped-def]
    settings.setdefault("scheme", SlotScheme(slots=24))
    return SlotJob(name="job", source=IterableSource(range(10)), handler=lambda r: None, **settings)


@pytest.mark.parametrize(
    ("settings", "reach", "closes"),
    [
        ({"backfill_limit": 0}, -1, DAY + timedelta(days=1)),
        ({"backfill_limit": 0, "catch_up": 3}, -1, DAY + timedelta(days=1)),
        ({"catch_up": 0}, 0, DAY + timedelta(days=1)),
        ({"catch_up": 1}, 1, DAY + timedelta(days=2)),
        ({"catch_up": 3}, 3, DAY + timedelta(days=4)),
    ],
)
def test_a_period_closes_when_the_last_backlog_that_reaches_it_ends(settings, reach, closes) -> None:  # type: ignore[no-untyped-def]
    job = _job(**settings)
    period = job.scheme.period_of(DAY)
    assert job.backlog_reach == reach
    assert job.closes_at(period) == closes
    # The same rule as the runner's backlog: the last period whose ticks reach it lists it, the next does not.
    history = DAY - timedelta(days=10)
    last = job.scheme.period_of(closes - timedelta(seconds=1))
    after = job.scheme.period_of(closes)
    assert (period in job.backlog_periods(last, history)) == (reach > 0)
    assert period not in job.backlog_periods(after, history)


def test_closes_at_in_local_time_across_dst() -> None:
    job = _job(scheme=SlotScheme(slots=24, tz="America/New_York"), catch_up=1)
    period = job.scheme.period_for_key("2026-03-07")
    assert job.closes_at(period).isoformat() == "2026-03-09T00:00:00-04:00"  # the 23-hour day in between


def test_closed_periods_are_the_latest_ones_from_the_history_on() -> None:
    job = _job(catch_up=1)
    now = DAY + timedelta(days=5, hours=7)  # 2026-12-06 07:00: 12-04 closed at 12-06 00:00
    keys = [period.key for period in closed_periods(job, now, DAY, limit=10)]
    assert keys == ["2026-12-01", "2026-12-02", "2026-12-03", "2026-12-04"]
    assert [p.key for p in closed_periods(job, now, DAY, limit=2)] == ["2026-12-03", "2026-12-04"]
    assert closed_periods(job, now, None) == []
    assert closed_periods(job, now, DAY + timedelta(days=5)) == []
    assert [p.key for p in closed_periods(_job(backfill_limit=0), now, DAY, limit=1)] == ["2026-12-05"]
