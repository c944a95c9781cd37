"""What failed and why, on both backends (issue 16): tracebacks kept where failures are recorded,
listed newest first by family and name, and SLA misses counted per name."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from vardiya.app import App
from vardiya.clock import SystemClock, VirtualClock
from vardiya.invoke.invoker import Invoker
from vardiya.invoke.retry import FixedWait, RetryPolicy
from vardiya.pipeline import Pipeline, run_pipeline
from vardiya.service.worker import Worker, WorkerSettings
from vardiya.slots import SlotScheme
from vardiya.slots.job import SlotJob
from vardiya.slots.runner import run_tick
from vardiya.slots.sources import IterableSource
from vardiya.store import Store, open_store
from vardiya.store.failures import FailureFamily, SlaMiss
from vardiya.store.schema import ledger_failures
from vardiya.tracebacks import TRACEBACK_LIMIT

DAY = datetime(2026, 12, 1, tzinfo=UTC)


def _lookup(record: int) -> None:
    settings: dict[str, str] = {}
    if record % 2:
        settings["db"]  # the failure under test: a KeyError deep in the user's code


def _ping(depth: int) -> None:
    # two functions calling each other: Python prints every frame (it folds only repeats of one line)
    if depth:
        _pong(depth - 1)
    raise RuntimeError("bottom of a deep stack")


def _pong(depth: int) -> None:
    _ping(depth)


def _job(handler, **settings) -> SlotJob:  # type: ignore[no-untyped-def]
    return SlotJob(
        name="nightly", scheme=SlotScheme(slots=1), source=IterableSource(range(1, 11)), handler=handler,
        backfill_limit=0, **settings,
    )


def test_a_failed_record_keeps_its_error_line_and_traceback(store: Store) -> None:
    report = run_tick(store, _job(_lookup), DAY)
    assert (report.done, report.failed) == (5, 5)
    assert report.failures is not None
    assert report.failures.by_error == {"KeyError: 'db'": 5}
    assert [record for _period, record, _error in report.failures.first] == ["1", "3", "5", "7", "9"]
    listed = store.failures.listing(family=FailureFamily.JOB, name="nightly")
    assert sorted(failure.what for failure in listed) == [f"2026-12-01/{i}" for i in (1, 3, 5, 7, 9)]
    failure = listed[0]
    assert failure.error == "KeyError: 'db'"
    assert failure.state == "failed"
    assert failure.traceback is not None
    assert failure.traceback.startswith("Traceback (most recent call last):")
    assert 'settings["db"]' in failure.traceback and "in _lookup" in failure.traceback
    assert failure.traceback.rstrip().endswith("KeyError: 'db'")
    # another job's name lists nothing; the handler family lists nothing
    assert store.failures.listing(family=FailureFamily.JOB, name="other") == []
    assert store.failures.listing(family=FailureFamily.HANDLER) == []


def test_a_long_traceback_keeps_its_end_within_the_bound(store: Store) -> None:
    run_tick(store, _job(lambda record: _ping(200)), DAY)
    with store.reading() as connection:
        texts = connection.execute(sa.select(ledger_failures.c.traceback)).scalars().all()
    assert len(texts) == 10
    for text in texts:
        assert len(text.encode()) <= TRACEBACK_LIMIT
        assert text.startswith("[traceback cut: its first ")
        assert text.endswith("RuntimeError: bottom of a deep stack")
        assert "\n  File " in text


def test_a_record_that_fails_again_replaces_its_failure_and_a_later_success_shows_done(store: Store) -> None:
    clock = store.clock
    assert isinstance(clock, VirtualClock)
    run_tick(store, _job(_lookup), DAY)
    clock.advance(timedelta(minutes=5))
    run_tick(store, _job(lambda record: None), DAY + timedelta(minutes=5))
    listed = store.failures.listing(name="nightly")
    assert len(listed) == 5
    assert {failure.state for failure in listed} == {"done"}


def test_dead_letter_attempts_keep_their_tracebacks(store: Store) -> None:
    app = App("calls")

    @app.handler("charge", retry=RetryPolicy(max_attempts=2, wait=FixedWait(seconds=0)))
    def charge(record: dict[str, int], context: object) -> None:
        raise ValueError(f"card {record['card']} declined")

    handle = Invoker(store, app).submit("charge", {"card": 7})
    Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    tracebacks = store.failures.attempt_tracebacks(handle.id)
    assert len(tracebacks) == 2
    for text in tracebacks:
        assert text is not None and "in charge" in text and text.endswith("ValueError: card 7 declined")
    listed = store.failures.listing(family=FailureFamily.HANDLER, name="charge")
    assert [(failure.attempt, failure.state) for failure in listed] == [(2, "dead"), (1, "dead")]
    assert listed[0].error == "ValueError: card 7 declined"


def test_a_failed_pipeline_task_keeps_its_traceback(store: Store, tmp_path: Path) -> None:
    pipeline = Pipeline("meters")

    @pipeline.stage()
    def load(context: object) -> None:
        raise OSError("meter feed unreachable")

    result = run_pipeline(store, pipeline, root=tmp_path)
    assert result.failed
    (failure,) = store.failures.listing(family=FailureFamily.PIPELINE, name="meters")
    assert failure.error == "OSError: meter feed unreachable"
    assert failure.traceback is not None and "in load" in failure.traceback
    assert failure.what.startswith("load")


def test_listing_is_newest_first_across_families_and_honours_since_and_limit(store: Store, tmp_path: Path) -> None:
    clock = store.clock
    assert isinstance(clock, VirtualClock)
    run_tick(store, _job(_lookup), DAY)
    clock.advance(timedelta(hours=1))
    pipeline = Pipeline("meters")

    @pipeline.stage()
    def load(context: object) -> None:
        raise OSError("meter feed unreachable")

    run_pipeline(store, pipeline, root=tmp_path)
    everything = store.failures.listing(limit=100)
    assert [failure.family for failure in everything] == [FailureFamily.PIPELINE] + [FailureFamily.JOB] * 5
    assert len(store.failures.listing(limit=2)) == 2
    since = store.failures.listing(since=DAY + timedelta(minutes=30))
    assert [failure.family for failure in since] == [FailureFamily.PIPELINE]


def test_sla_misses_add_up_per_name_and_keep_the_last(store: Store) -> None:
    def miss(name: str, took_ms: float) -> SlaMiss:
        return SlaMiss(family=FailureFamily.HANDLER, name=name, ref=f"item {int(took_ms)}", expected_ms=100.0,
                       took_ms=took_ms, at=DAY)

    store.failures.sla_missed([miss("charge", 150), miss("charge", 300)])
    store.failures.sla_missed([miss("charge", 120), miss("refund", 500)])
    rows = {row.name: row for row in store.failures.sla_report()}
    assert (rows["charge"].missed, rows["charge"].last_took_ms, rows["charge"].last_ref) == (3, 120, "item 120")
    assert rows["refund"].missed == 1


def test_a_tick_over_its_sla_is_counted(store: Store) -> None:
    report = run_tick(store, _job(lambda record: None, sla=timedelta(microseconds=1)), DAY, timer=SystemClock())
    assert report.sla_missed_s is not None and report.sla_missed_s > 0
    (row,) = store.failures.sla_report()
    assert (row.family, row.name, row.missed) == (FailureFamily.JOB, "nightly", 1)
    report = run_tick(store, _job(lambda record: None, sla=timedelta(hours=1)), DAY)
    assert report.sla_missed_s is None
    assert store.failures.sla_report()[0].missed == 1


def test_handler_calls_and_pipeline_tasks_over_their_sla_are_counted(store_url: str, tmp_path: Path) -> None:
    # durations are the store clock's: a real one here, so that a call takes longer than a microsecond
    with open_store(store_url, clock=SystemClock()) as timed:
        app = App("calls")

        @app.handler("charge", sla=timedelta(microseconds=1))
        def charge(record: dict[str, int], context: object) -> None:
            sum(range(1_000))

        @app.handler("refund", sla=timedelta(hours=1))
        def refund(record: dict[str, int], context: object) -> None: ...

        invoker = Invoker(timed, app)
        for card in range(3):
            invoker.submit("charge", {"card": card})
            invoker.submit("refund", {"card": card})
        Worker(timed, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
        pipeline = Pipeline("meters")

        @pipeline.stage(sla=timedelta(microseconds=1))
        def load(context: object) -> None:
            sum(range(1_000))

        assert run_pipeline(timed, pipeline, root=tmp_path).ok
        rows = {(row.family, row.name): row.missed for row in timed.failures.sla_report()}
    assert rows == {(FailureFamily.HANDLER, "charge"): 3, (FailureFamily.PIPELINE, "meters.load"): 1}
