from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from vardiya.clock import SystemClock, VirtualClock, ensure_aware
from vardiya.errors import InvalidInput

START = datetime(2026, 12, 1, tzinfo=timezone.utc)


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
