"""WorkerSettings: every tuning option of a worker in one frozen value, refused when bad (nothing written)."""

from __future__ import annotations

import dataclasses
import threading
from datetime import UTC, datetime, timedelta, timezone

import pytest

from vardiya import InvalidInput, Worker, WorkerSettings
from vardiya.clock import SystemClock, VirtualClock
from vardiya.invoke.idle import IdleWait
from vardiya.invoke.report import WorkerReport


def test_the_defaults_are_what_vardiya_worker_runs_with() -> None:
    settings = WorkerSettings()
    assert (settings.concurrency, settings.prefetch, settings.heartbeat, settings.owner, settings.names) == (
        1, 100, True, None, ()
    )
    assert settings.lease == timedelta(seconds=30) and settings.lease_s == 30.0
    assert (settings.poll_min_s, settings.poll_max_s) == (0.01, 0.25)


def test_numbers_are_read_as_seconds_and_names_as_a_tuple() -> None:
    settings = WorkerSettings(lease=2.5, poll_min=0.5, poll_max=1, names=["a", "b"])
    assert settings.lease == timedelta(seconds=2.5)
    assert (settings.poll_min, settings.poll_max) == (timedelta(seconds=0.5), timedelta(seconds=1))
    assert settings.names == ("a", "b")
    assert WorkerSettings(names="only").names == ("only",)
    assert settings.to_json()["lease_s"] == 2.5


def test_it_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        WorkerSettings().prefetch = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": 0}, "concurrency must be a whole number of at least 1"),
        ({"concurrency": True}, "concurrency must be a whole number"),
        ({"prefetch": 1.5}, "prefetch must be a whole number"),
        ({"lease": 0}, "a lease must be more than 0 seconds"),
        ({"lease": timedelta(seconds=-1)}, "a lease must be more than 0 seconds"),
        ({"lease": "30"}, "a lease must be a timedelta or a number of seconds"),
        ({"lease": float("nan")}, "a lease must be a finite number"),
        ({"lease": 1e300}, "longer than any duration"),
        ({"poll_min": 2, "poll_max": 1}, "poll_min .* is longer than poll_max"),
        ({"heartbeat": "no"}, "heartbeat must be True or False"),
        ({"owner": " "}, "owner must be a non-empty name"),
        ({"names": [""]}, "names must be non-empty strings"),
        ({"names": 3}, "names must be a list"),
    ],
)
def test_bad_settings_are_refused_when_made(options: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        WorkerSettings(**options)  # type: ignore[arg-type]


def test_a_name_the_app_lacks_is_refused_before_a_store_is_opened() -> None:
    with pytest.raises(InvalidInput, match="'nope' is not a handler, slot job, pipeline or periodic function"):
        Worker.check({}, WorkerSettings(names=("nope",)))
    assert Worker.check({}, WorkerSettings()) == {}


def test_the_report_adds_from_many_threads_without_losing_a_count() -> None:
    report = WorkerReport()

    def add() -> None:
        for _ in range(1_000):
            report.add(items=1, succeeded=1)

    threads = [threading.Thread(target=add) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert report.to_json()["items"] == 4_000 == report.succeeded
    with pytest.raises(AttributeError):
        report.add(no_such_count=1)


class _Waker:
    def __init__(self) -> None:
        self.waits: list[float | None] = []

    def wait(self, stop: threading.Event, timeout: float | None = None) -> None:
        self.waits.append(timeout)

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_an_idle_wait_on_a_virtual_clock_moves_time_to_the_due_moment() -> None:
    clock = VirtualClock(datetime(2026, 1, 1, tzinfo=UTC))
    waker = _Waker()
    idle = IdleWait(clock, waker, threading.Event(), poll_min_s=0.01, poll_max_s=0.25)  # type: ignore[arg-type]
    idle.until(clock.now() + timedelta(minutes=5))
    assert clock.now() == datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    assert waker.waits == []  # no real wait: a replay never stalls


def test_an_idle_wait_on_the_real_clock_blocks_in_the_waker_for_at_most_poll_max() -> None:
    waker = _Waker()
    clock = SystemClock()
    idle = IdleWait(clock, waker, threading.Event(), poll_min_s=0.01, poll_max_s=0.25)  # type: ignore[arg-type]
    idle.until(clock.now() + timedelta(hours=1))
    idle.until(clock.now() - timedelta(seconds=1))  # already due: the shortest wait
    assert waker.waits == [0.25, 0.01]
