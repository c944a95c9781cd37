"""Periodic functions declared: their planned times (pure), and every bad declaration refused in one line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from vardiya.app import App
from vardiya.errors import ConfigurationError
from vardiya.schedule import Periodic
from vardiya.schedule.periodic import PeriodicSchedule

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def nothing() -> None:
    return None


def test_every_counts_from_its_anchor_and_never_from_now() -> None:
    periodic = Periodic(name="p", fn=nothing, every=timedelta(minutes=5))
    times = list(periodic.times(T0 + timedelta(minutes=2), T0 + timedelta(minutes=20)))
    assert times == [T0 + timedelta(minutes=m) for m in (5, 10, 15, 20)]
    assert list(periodic.times(T0, T0)) == []  # (after, through]: the time of the cursor is not again
    anchored = Periodic(name="q", fn=nothing, every=timedelta(hours=1), anchor=T0 + timedelta(minutes=30))
    assert list(anchored.times(T0, T0 + timedelta(hours=2))) == [
        T0 + timedelta(minutes=30), T0 + timedelta(minutes=90)
    ]


def test_cron_times_follow_the_zone_across_dst() -> None:
    periodic = Periodic(name="p", fn=nothing, cron="30 2 * * *", tz="Europe/Berlin")
    # 2027-03-28: 02:30 does not exist in Berlin; cronie's rule fires once when the gap ends (03:00 CEST)
    start = datetime(2027, 3, 27, tzinfo=UTC)
    times = list(periodic.times(start, start + timedelta(days=2)))
    assert times == [datetime(2027, 3, 27, 1, 30, tzinfo=UTC), datetime(2027, 3, 28, 1, 0, tzinfo=UTC)]


def test_the_function_gets_the_planned_time_in_its_zone_when_it_takes_an_argument() -> None:
    got: list[datetime] = []
    with_time = Periodic(name="p", fn=got.append, cron="0 9 * * *", tz="Europe/Istanbul")
    with_time.call(T0)
    assert got == [T0] and got[0].utcoffset() == timedelta(hours=3)
    assert Periodic(name="q", fn=lambda: "ran", every=timedelta(minutes=1)).call(T0) == "ran"


def test_a_schedule_that_never_ran_starts_planning_one_interval_back() -> None:
    schedule = PeriodicSchedule(Periodic(name="p", fn=nothing, every=timedelta(minutes=5)))
    assert schedule.next_after(T0 + timedelta(minutes=1)) == T0 + timedelta(minutes=5)
    assert schedule.times(schedule.origin(T0 + timedelta(minutes=7)), T0 + timedelta(minutes=7)) == [
        T0 + timedelta(minutes=5)
    ]


def two_arguments(a: Any, b: Any) -> None:
    return None


def keyword_only(*, when: Any) -> None:
    return None


@pytest.mark.parametrize(
    ("settings", "fragments"),
    [
        ({"cron": "61 * * * *"}, ["invalid cron expression '61 * * * *'", "five fields"]),
        ({"cron": "*/5 * * * *", "tz": "Mars/Olympus"}, ["unknown time zone 'Mars/Olympus'", "IANA"]),
        ({}, ["exactly one of every=timedelta(...) or cron="]),
        ({"every": timedelta(minutes=5), "cron": "* * * * *"}, ["exactly one of"]),
        ({"every": timedelta(milliseconds=10)}, ["at least 1 second", "timedelta(minutes=5)"]),
        ({"every": 300}, ["every must be a timedelta"]),
        ({"every": timedelta(minutes=1), "max_attempts": 0}, ["max_attempts must be a whole number of at least 1"]),
        ({"every": timedelta(minutes=1), "anchor": datetime(2026, 1, 1)}, ["anchor must be a timezone-aware"]),
        ({"every": timedelta(minutes=1), "fn": two_arguments}, ["takes 2 required arguments", "planned time"]),
        ({"every": timedelta(minutes=1), "fn": keyword_only}, ["takes 1 required arguments"]),
        ({"every": timedelta(minutes=1), "name": "has space"}, ["a periodic function name must be"]),
    ],
    ids=["bad-cron", "bad-zone", "neither", "both", "too-short", "not-a-timedelta", "zero-attempts",
         "naive-anchor", "two-arguments", "keyword-only", "bad-name"],
)
def test_bad_declarations_are_refused(settings: dict[str, Any], fragments: list[str]) -> None:
    arguments: dict[str, Any] = {"name": "p", "fn": nothing, **settings}
    with pytest.raises(ConfigurationError) as raised:
        Periodic(**arguments)
    message = str(raised.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


def test_the_decorators_register_by_function_name_and_refuse_a_second_of_one_name() -> None:
    app = App("decorated")

    @app.every(timedelta(minutes=5))
    def refresh() -> None:
        return None

    @app.cron("*/5 * * * *", tz="Europe/Istanbul", name="digest")
    def send() -> None:
        return None

    assert sorted(app.periodic) == ["digest", "refresh"]
    assert app.get_periodic("digest").describe() == "cron '*/5 * * * *' in Europe/Istanbul"
    assert refresh() is None  # the decorated function is returned unchanged
    with pytest.raises(ConfigurationError, match="already has a periodic function named 'refresh'"):
        app.every(timedelta(minutes=1))(refresh)
    with pytest.raises(ConfigurationError, match="no periodic function 'nope'; its periodic functions: digest, refresh"):
        app.get_periodic("nope")
