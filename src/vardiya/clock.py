"""Time, injected.

Engine code never reads the time itself: it asks the ``Clock`` it was given. ``SystemClock`` is the
real one; ``VirtualClock`` is moved by hand (or by ``sleep``), which is what makes time-dependent tests
exact and lets the planner replay a workload through the real engine in milliseconds.

This is the only module of vardiya that reads the system time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

from .errors import InvalidInput
from .limits import TIME_MAX, check_time

__all__ = ["Clock", "SystemClock", "VirtualClock", "Wake", "ensure_aware", "to_seconds", "to_timedelta"]

#: Blocks for up to the seconds it is given, returning early when something happened (new work, a stop).
Wake = Callable[[float], object]


def to_seconds(value: float | timedelta) -> float:
    """Seconds in a duration given as a number of seconds or a ``timedelta``."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)


def to_timedelta(value: float | timedelta, what: str) -> timedelta:
    """A duration given as a ``timedelta`` or a number of seconds, as a ``timedelta``.

    The Python API takes durations as ``timedelta`` (ARCHITECTURE.md, "Durations"); a plain number is
    read as seconds at the boundary, and anything else is an ``InvalidInput`` naming ``what``.
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"{what} must be a timedelta or a number of seconds, got {value!r}")
    return timedelta(seconds=value)


def ensure_aware(moment: datetime, what: str = "time") -> datetime:
    """Return ``moment`` in UTC; a naive datetime is rejected because its zone would be a guess."""
    if moment.tzinfo is None or moment.tzinfo.utcoffset(moment) is None:
        raise InvalidInput(
            f"{what} {moment.isoformat()} has no time zone; give an aware datetime "
            "(e.g. with tzinfo=timezone.utc or an offset like +03:00)"
        )
    return moment.astimezone(UTC)


@runtime_checkable
class Clock(Protocol):
    """Where the engine gets the time from."""

    def now(self) -> datetime:
        """The current time, timezone-aware, in UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin that never goes backwards; for durations."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a virtual clock advances instead of waiting)."""
        ...

    def wait(self, seconds: float, wake: Wake) -> None:
        """Wait idle for up to ``seconds``, or until ``wake`` (which blocks the real time it is given)
        returns early: the real clock lets ``wake`` block, a virtual one moves its time on at once
        (no other thread's work can arrive in virtual time, and a replay must not stall)."""
        ...


class SystemClock:
    """The real clock of the machine."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, seconds: float, wake: Wake) -> None:
        wake(seconds)

    def __repr__(self) -> str:
        return "SystemClock()"


class VirtualClock:
    """A clock that only moves when told to: ``advance`` or ``sleep``.

    Thread-safe, so a test can advance it while engine threads read it. Its time stays in the
    supported range (``limits.TIME_MIN`` to ``TIME_MAX``): a start, a jump or an advance past it is
    refused, so no engine code computes a lease or a window beyond Python's last date.
    """

    def __init__(self, start: datetime | None = None) -> None:
        origin = start if start is not None else datetime(2026, 1, 1, tzinfo=UTC)
        self._now = check_time(ensure_aware(origin, "VirtualClock start"), "VirtualClock start")
        self._elapsed = 0.0
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return self._elapsed

    def advance(self, by: float | timedelta) -> datetime:
        """Move time forward by ``by`` (seconds or a timedelta) and return the new time."""
        seconds = to_seconds(by)
        if seconds < 0:
            raise InvalidInput(f"cannot advance a VirtualClock by {seconds} s; time only moves forward")
        with self._lock:
            try:
                moved = self._now + timedelta(seconds=seconds)
            except OverflowError:
                moved = None
            if moved is None or moved >= TIME_MAX:
                raise InvalidInput(
                    f"cannot advance a VirtualClock at {self._now.isoformat()} by {seconds} s: "
                    f"it would pass {TIME_MAX.isoformat()}, the end of the times vardiya supports"
                )
            self._now = moved
            self._elapsed += seconds
            return self._now

    def set(self, moment: datetime) -> None:
        """Jump to ``moment``, forwards or backwards (to test clock steps); monotonic time is kept."""
        with self._lock:
            self._now = check_time(ensure_aware(moment, "VirtualClock time"), "VirtualClock time")

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.advance(seconds)

    def wait(self, seconds: float, wake: Wake) -> None:
        self.sleep(seconds)

    def __repr__(self) -> str:
        return f"VirtualClock({self.now().isoformat()})"
