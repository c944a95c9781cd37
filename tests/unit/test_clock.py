from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from vardiya.clock import SystemClock, VirtualClock, ensure_aware
from vardiya.errors import InvalidInput

START = datetime(2026, 12, 1, tzinfo=UTC)


def test_virtual_clock_moves_only_when_told() -> None:
    clock = VirtualClock(START)
    assert clock.now() == START
    assert clock.now() == START
    clock.advance(90)
    assert clock.now() == START + timedelta(seconds=90)
    clock.sleep(10)
    assert clock.now() == START + timedelta(seconds=100)
    assert clock.monotonic() == 100


def test_virtual_clock_set_jumps_both_ways_but_monotonic_does_not() -> None:
    clock = VirtualClock(START)
    clock.advance(60)
    clock.set(START - timedelta(hours=1))
    assert clock.now() == START - timedelta(hours=1)
    assert clock.monotonic() == 60


def test_virtual_clock_refuses_naive_times_and_going_back_with_advance() -> None:
    with pytest.raises(InvalidInput, match="no time zone"):
        VirtualClock(datetime(2026, 12, 1))
    with pytest.raises(InvalidInput, match="forward"):
        VirtualClock(START).advance(-1)


def test_ensure_aware_converts_to_utc() -> None:
    istanbul = timezone(timedelta(hours=3))
    assert ensure_aware(datetime(2026, 12, 1, 3, tzinfo=istanbul)) == START


def test_system_clock_is_aware_and_monotonic() -> None:
    clock = SystemClock()
    assert clock.now().tzinfo is not None
    assert clock.monotonic() <= clock.monotonic()


def test_to_timedelta_reads_numbers_as_seconds_and_refuses_anything_else() -> None:
    from vardiya.clock import to_timedelta

    assert to_timedelta(timedelta(minutes=2), "lease") == timedelta(minutes=2)
    assert to_timedelta(1.5, "lease") == timedelta(seconds=1.5)
    for bad in ("30", True, None):
        with pytest.raises(InvalidInput, match="lease must be a timedelta or a number of seconds"):
            to_timedelta(bad, "lease")  # type: ignore[arg-type]


def test_a_virtual_clock_waits_by_moving_on_and_never_calls_the_wake() -> None:
    clock = VirtualClock(datetime(2026, 1, 1, tzinfo=UTC))
    woken: list[float] = []
    clock.wait(90, woken.append)
    assert clock.now() == datetime(2026, 1, 1, 0, 1, 30, tzinfo=UTC)
    assert woken == []


def test_the_system_clock_waits_by_letting_the_wake_block() -> None:
    woken: list[float] = []
    SystemClock().wait(0.25, woken.append)
    assert woken == [0.25]
