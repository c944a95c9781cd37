"""What an idle worker and an idle scheduler wait for, on both backends and a virtual clock (issue 16).

- A rate-limited worker whose bucket is empty waits until the bucket's next token is due (computed
  from the stored bucket), not a poll at a time; a worker that is not draining wakes then too.
- An idle worker logs once what it waits for (the next due item's time and kind, a token, or new
  work), and once when work resumes; an idle scheduler logs its next planned fire time once per change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from vardiya.app import App
from vardiya.clock import VirtualClock, Wake
from vardiya.invoke.idle import IdleWait
from vardiya.invoke.invoker import Invoker
from vardiya.invoke.retry import FixedWait, RetryPolicy
from vardiya.rules.rates import RateLimit
from vardiya.service.scheduler import Scheduler
from vardiya.service.worker import Worker, WorkerSettings
from vardiya.slots.scheme import SlotScheme
from vardiya.slots.sources import IterableSource
from vardiya.store import Store, open_store

from ..support.schedulers import at

START = datetime(2026, 12, 1, tzinfo=UTC)


class RecordingClock(VirtualClock):
    """A virtual clock that keeps every idle wait it was asked for, in seconds."""

    def __init__(self, start: datetime) -> None:
        super().__init__(start)
        self.waits: list[float] = []

    def wait(self, seconds: float, wake: Wake) -> None:
        self.waits.append(seconds)
        super().wait(seconds, wake)


class ScriptedIdle(IdleWait):
    """An idle wait that never blocks: each ``for_work`` is recorded and handed to ``script``."""

    def __init__(self, worker: Worker, script: Callable[[int, datetime | None], None]) -> None:
        self.worker, self.script = worker, script
        self.calls: list[datetime | None] = []

    def worked(self) -> None:
        pass

    def until(self, moment: datetime) -> None:  # pragma: no cover - run() without until_idle never calls it
        raise AssertionError("a worker that is not draining waits for work, not until a time")

    def for_work(self, coming: datetime | None = None) -> None:
        self.calls.append(coming)
        self.script(len(self.calls), coming)

    def close(self) -> None:
        pass


def _limited_app(rate: str, started: list[datetime], clock: VirtualClock) -> App:
    app = App("rates")

    @app.handler("ping", rate_limit=rate)
    def ping(record: Any, context: Any) -> Any:
        started.append(clock.now())
        return record["n"]

    return app


def _idle_lines(caplog: pytest.LogCaptureFixture, owner: str) -> list[str]:
    return [
        record.getMessage() for record in caplog.records
        if record.name == "vardiya.worker" and record.getMessage().startswith((f"{owner} idle", f"{owner}: work resumed"))
    ]


def test_an_empty_bucket_is_waited_for_until_its_next_token(store_url: str, caplog: pytest.LogCaptureFixture) -> None:
    clock = RecordingClock(START)
    started: list[datetime] = []
    with open_store(store_url, clock=clock) as store:
        app = _limited_app("2/m", started, clock)
        Invoker(store, app).submit_many("ping", [{"n": n} for n in range(5)])
        with caplog.at_level(logging.INFO, logger="vardiya.worker"):
            report = Worker(store, app, WorkerSettings(heartbeat=False, owner="w1")).run(until_idle=True)
    assert report.succeeded == 5
    # the burst of 2 at once, then one every 30 s: three waits, each exactly to the next token
    assert clock.waits == pytest.approx([30.0, 30.0, 30.0], abs=1e-5)
    assert [(moment - START).total_seconds() for moment in started] == pytest.approx([0, 0, 30, 60, 90], abs=1e-5)
    lines = _idle_lines(caplog, "w1")
    assert lines[0].startswith("w1 idle: waiting for the next token of handler 'ping' (rate limit 2/m) due at 2026-12-01T00:00:30")
    assert lines[1] == "w1: work resumed"
    assert len(lines) == 6  # three waits, three resumes: one line each


def test_a_worker_that_is_not_draining_wakes_when_the_next_token_is_due(store: Store, clock: VirtualClock) -> None:
    started: list[datetime] = []
    app = _limited_app("4/s", started, clock)
    Invoker(store, app).submit_many("ping", [{"n": n} for n in range(6)])
    worker = Worker(store, app, WorkerSettings(heartbeat=False))
    idle = ScriptedIdle(worker, lambda calls, coming: worker.stop())
    worker.loop.idle = lambda: idle
    worker.run()
    assert len(started) == 4  # the burst
    assert idle.calls == [START + timedelta(seconds=0.25)]  # one token at 4 a second, not a poll_max later
    token = store.rate_buckets.next_token({"ping": RateLimit(count=4, per_s=1.0)})
    assert token is not None and (token.bucket, token.at) == ("ping", START + timedelta(seconds=0.25))


def test_a_full_or_unknown_bucket_has_its_token_now_and_none_is_asked_without_limits(store: Store, clock: VirtualClock) -> None:
    assert store.rate_buckets.next_token({}) is None
    token = store.rate_buckets.next_token({"never_claimed": RateLimit(count=10, per_s=60.0), "a": RateLimit(count=1, per_s=3600.0)})
    assert token is not None and token.at == clock.now() and token.bucket == "a"  # both full: the first by name


def test_an_idle_worker_logs_the_next_due_item_then_that_work_resumed(
    store: Store, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    app = App("flaky")
    calls: list[datetime] = []

    @app.handler("flaky", retry=RetryPolicy(max_attempts=3, wait=FixedWait(seconds=5)))
    def flaky(record: Any, context: Any) -> Any:
        calls.append(clock.now())
        if len(calls) == 1:
            raise RuntimeError("not yet")
        return "ok"

    Invoker(store, app).submit("flaky", {"n": 1})
    with caplog.at_level(logging.INFO, logger="vardiya.worker"):
        report = Worker(store, app, WorkerSettings(heartbeat=False, owner="w2")).run(until_idle=True)
    assert report.succeeded == 1 and calls == [START, START + timedelta(seconds=5)]
    assert _idle_lines(caplog, "w2") == [
        "w2 idle: waiting for call:flaky due at 2026-12-01T00:00:05+00:00",
        "w2: work resumed",
    ]
    (line,) = [record for record in caplog.records if record.getMessage().startswith("w2 idle")]
    assert (line.levelno, line.waiting_for, line.due_at) == (logging.INFO, "call:flaky", "2026-12-01T00:00:05+00:00")  # type: ignore[attr-defined]


def test_a_waiting_worker_logs_new_work_once_not_every_loop(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    app = App("mail")

    @app.handler("mail")
    def mail(record: Any, context: Any) -> Any:
        return None

    worker = Worker(store, app, WorkerSettings(heartbeat=False, owner="w3"))
    invoker = Invoker(store, app)

    def script(calls: int, coming: datetime | None) -> None:
        if calls == 3:
            invoker.submit("mail", {"to": "ops@example.com"})  # arrives during the third wait
        if calls == 6:
            worker.stop()

    idle = ScriptedIdle(worker, script)
    worker.loop.idle = lambda: idle
    with caplog.at_level(logging.INFO, logger="vardiya.worker"):
        worker.run()
    assert idle.calls == [None] * 6  # no due item, no token: it waits for a notification
    assert worker.report.succeeded == 1
    assert _idle_lines(caplog, "w3") == ["w3 idle: waiting for new work", "w3: work resumed", "w3 idle: waiting for new work"]


def _hourly() -> App:
    app = App("idle-scheduler")

    @app.slot_job("hourly", scheme=SlotScheme(slots=24), source=IterableSource(range(10)))
    def handle(record: int) -> None:
        return None

    return app


def test_an_idle_scheduler_logs_its_next_planned_fire_once_per_change(
    store: Store, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    at(clock, START + timedelta(hours=5, minutes=20))
    scheduler = Scheduler(store, _hourly(), owner="s1")
    with caplog.at_level(logging.INFO, logger="vardiya.scheduler"):
        assert scheduler.step().fired  # the 05:00 tick: not idle
        for minutes in (30, 40, 50):  # three idle steps, one line
            at(clock, START + timedelta(hours=5, minutes=minutes))
            assert not scheduler.step().fired
        at(clock, START + timedelta(hours=6))
        assert scheduler.step().fired
        at(clock, START + timedelta(hours=6, minutes=10))
        assert not scheduler.step().fired
    lines = [record.getMessage() for record in caplog.records if record.getMessage().startswith("s1 idle")]
    assert lines == [
        "s1 idle: next planned fire is tick:hourly at 2026-12-01T06:00:00+00:00",
        "s1 idle: next planned fire is tick:hourly at 2026-12-01T07:00:00+00:00",
    ]
    assert scheduler.next_planned() == ("tick:hourly", START + timedelta(hours=7))
