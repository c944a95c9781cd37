"""Pipeline triggers on each backend, on a virtual clock: a schedule, a period close, data arrival, upstream.

The scheduler fires work items; a worker runs the triggered partition; ``triggers_report`` then says per
task how often it ran and what started it, naming the runs that succeeded with nothing (a schedule that
fired before the data existed).
"""

from __future__ import annotations

import csv
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from vardiya.app import App
from vardiya.clock import VirtualClock
from vardiya.errors import ConfigurationError
from vardiya.pipeline import Daily, Pipeline, Static, TaskState, same
from vardiya.pipeline.state import PipelineState
from vardiya.pipeline.triggers_report import triggers_report
from vardiya.schedule import CatchUpPolicy, Cron, DataArrival, PeriodClose, Upstream
from vardiya.service.scheduler import Scheduler
from vardiya.service.worker import Worker, WorkerSettings
from vardiya.store import ItemState, Store

DAY1 = datetime(2026, 12, 1, tzinfo=UTC)
NEVER_CATCH_UP = CatchUpPolicy(max_ticks=0, grace=timedelta(0))


def write_rows(path: Path, count: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "value"])
        writer.writerows([[n, n * 10] for n in range(count)])


def read_rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def landing_pipeline(name: str, landing: Path, partitions: Any) -> Pipeline:
    pipeline = Pipeline(name)

    @pipeline.stage(partitions=partitions)
    def ingest(context: Any) -> list[dict[str, str]]:
        return read_rows(landing / f"{context.partition}.csv")

    @pipeline.stage(partitions=partitions, depends_on={"ingest": same()})
    def clean(context: Any) -> list[dict[str, str]]:
        return [row for row in context.read("ingest") if row["value"]]

    return pipeline


def at(clock: VirtualClock, moment: datetime) -> None:
    clock.advance(moment - clock.now())


def run_all(store: Store, app: App) -> Any:
    return Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)


def test_a_period_close_trigger_runs_each_day_once_after_its_close(store: Store, clock: VirtualClock, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    for day in ("2026-12-01", "2026-12-02"):
        write_rows(landing / f"{day}.csv", 5)
    app = App("close")
    pipeline = landing_pipeline("daily", landing, Daily(start="2026-12-01", end="2026-12-03"))
    app.add_pipeline(pipeline, root=tmp_path / "out", triggers=[PeriodClose(delay=timedelta(hours=2), name="closed")])
    scheduler = Scheduler(store, app)
    at(clock, DAY1 + timedelta(hours=20))
    assert scheduler.step().fired == []  # 2026-12-01 closes at midnight, plus 2 h
    at(clock, DAY1 + timedelta(days=1, hours=2))
    fired = scheduler.step().fired
    assert [(firing.key, firing.payload["partition"]) for firing in fired] == [("closed:2026-12-01", "2026-12-01")]
    assert run_all(store, app).pipeline_runs == 1
    tasks = PipelineState(store, "daily").tasks()
    assert {name: record.state for name, record in tasks.items()} == {
        "ingest@2026-12-01": TaskState.SUCCEEDED, "clean@2026-12-01": TaskState.SUCCEEDED,
    }
    at(clock, DAY1 + timedelta(days=2, hours=3))
    assert [firing.payload["partition"] for firing in scheduler.step().fired] == ["2026-12-02"]
    run_all(store, app)
    report = triggers_report(store, app.get_pipeline("daily").graph)
    document = report.to_json()
    assert document["tasks"]["ingest@2026-12-02"]["by_trigger"] == {"closed": 1}
    assert document["tasks"]["ingest@2026-12-03"]["count"] == 0
    assert document["empty"] == []
    run = document["tasks"]["ingest@2026-12-01"]["runs"][0]
    assert run["planned_at"] == (DAY1 + timedelta(days=1, hours=2)).isoformat() and run["rows"] == 5


def test_a_first_start_on_a_new_store_passes_nothing_by_and_says_how_to_backfill(
    store: Store, clock: VirtualClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A new pipeline whose partitions began days ago: the latest closed day fires; the earlier days
    were never missed (no scheduler was meant to run them), so nothing counts as passed by, and the
    log names them and the backfill command that runs them."""
    app = App("late-start")
    pipeline = landing_pipeline("daily", tmp_path / "landing", Daily(start="2026-12-01", end="2026-12-10"))
    app.add_pipeline(pipeline, root=tmp_path / "out", triggers=[PeriodClose(delay=timedelta(hours=2), name="closed")])
    at(clock, DAY1 + timedelta(days=5, hours=3))
    with caplog.at_level("INFO", logger="vardiya"):
        step = Scheduler(store, app).step()
    assert [firing.payload["partition"] for firing in step.fired] == ["2026-12-05"]
    assert step.skipped == {}
    state = store.schedules.get(next(iter(Scheduler(store, app).schedules)))
    assert state is not None and state.skipped == 0
    said = [record.getMessage() for record in caplog.records if "first start" in record.getMessage()]
    assert len(said) == 1 and "4 earlier time(s)" in said[0], said
    assert "vardiya pipeline backfill daily --from 2026-12-01 --to 2026-12-04" in said[0]
    assert not [record for record in caplog.records if "passed by" in record.getMessage()]


def test_a_schedule_that_fires_before_the_data_is_reported_as_an_empty_run(
    store: Store, clock: VirtualClock, tmp_path: Path
) -> None:
    """Cron at 06:00 runs the day's partition whatever is there; the data lands at 07:00. The sensor of a
    second pipeline over the same landing directory starts the partition only once the file exists."""
    landing = tmp_path / "landing"
    app = App("eager-and-patient")
    days = Daily(start="2026-12-01", end="2026-12-02")
    app.add_pipeline(
        landing_pipeline("eager", landing, days), root=tmp_path / "out",
        triggers=[Cron(expr="0 6 * * *", lag=0, name="six", downtime=NEVER_CATCH_UP)],
    )
    app.add_pipeline(
        landing_pipeline("patient", landing, days), root=tmp_path / "out",
        triggers=[DataArrival(path=str(landing / "{partition}.csv"), every=60, name="landed")],
    )
    scheduler = Scheduler(store, app)
    scheduler.step()  # running since midnight: 06:00 comes due while it runs
    at(clock, DAY1 + timedelta(hours=6))
    fired = scheduler.step().fired
    assert [firing.key.split("@")[0] for firing in fired] == ["six"]  # the sensor found nothing
    run_all(store, app)
    at(clock, DAY1 + timedelta(hours=6, minutes=30))
    assert scheduler.step().fired == []
    write_rows(landing / "2026-12-01.csv", 7)
    at(clock, DAY1 + timedelta(hours=7))
    fired = scheduler.step().fired
    assert [firing.key for firing in fired] == ["landed:2026-12-01"]
    run_all(store, app)
    at(clock, DAY1 + timedelta(hours=9))
    assert scheduler.step().fired == []  # started once; 2026-12-02 has begun? no: it has not
    eager = triggers_report(store, app.get_pipeline("eager").graph)
    patient = triggers_report(store, app.get_pipeline("patient").graph)
    assert eager.empty == ["ingest@2026-12-01", "clean@2026-12-01"]
    assert patient.empty == []
    [run] = patient.to_json()["tasks"]["ingest@2026-12-01"]["runs"]
    assert run["started_by"] == "landed" and run["rows"] == 7
    assert datetime.fromisoformat(run["started_at"]) >= DAY1 + timedelta(hours=7)


def test_a_sensor_on_sql_and_an_upstream_trigger(store: Store, clock: VirtualClock, tmp_path: Path) -> None:
    import sqlite3

    source = tmp_path / "source.db"
    with sqlite3.connect(source) as connection:
        connection.execute("CREATE TABLE readings (period TEXT, value INTEGER)")
    landing = tmp_path / "landing"
    regions = Static(keys=["north", "south"])
    app = App("chained")
    app.add_pipeline(
        landing_pipeline("first", landing, regions), root=tmp_path / "out",
        triggers=[DataArrival(sql="SELECT count(*) FROM readings WHERE period = :partition", db=f"sqlite:///{source}", every=1)],
    )
    app.add_pipeline(
        landing_pipeline("second", landing, regions), root=tmp_path / "out",
        triggers=[Upstream(pipeline="first", stage="clean", every=1)],
    )
    scheduler = Scheduler(store, app)
    assert scheduler.step().fired == []
    with sqlite3.connect(source) as connection:
        connection.execute("INSERT INTO readings VALUES ('south', 1)")
    at(clock, DAY1 + timedelta(seconds=2))
    assert [firing.key for firing in scheduler.step().fired] == ["data-1:south"]
    run_all(store, app)
    at(clock, DAY1 + timedelta(seconds=4))
    assert [firing.key for firing in scheduler.step().fired] == ["upstream-1:south"]
    run_all(store, app)
    tasks = PipelineState(store, "second").tasks()
    assert sorted(tasks) == ["clean@south", "ingest@south"]


def test_a_triggered_run_that_fails_is_retried_then_dead_lettered(store: Store, clock: VirtualClock, tmp_path: Path) -> None:
    pipeline = Pipeline("fragile")

    @pipeline.stage(partitions=Static(keys=["only"]))
    def boom(context: Any) -> list[dict[str, int]]:
        raise RuntimeError("the source is down")

    app = App("fragile")
    app.add_pipeline(
        pipeline, root=tmp_path / "out", max_attempts=2, retry_wait_s=30,
        triggers=[Cron(expr="*/5 * * * *", name="often", downtime=NEVER_CATCH_UP)],
    )
    scheduler = Scheduler(store, app)
    scheduler.step()
    at(clock, DAY1 + timedelta(minutes=5))
    [firing] = scheduler.step().fired
    report = run_all(store, app)
    item = store.items.find(firing.kind, firing.key)
    assert item is not None and item.state is ItemState.DEAD and item.attempts == 2
    assert report.retried == 1 and report.dead == 1
    assert "failed boom@only" in (item.last_error or "")
    assert [attempt.outcome.value for attempt in store.items.history(item.id)] == ["failed", "failed"]


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda: Cron(expr="61 * * * *"), "invalid cron expression '61 * * * *'"),
        (lambda: Cron(expr="0 3 * *"), "invalid cron expression"),
        (lambda: Cron(expr="0 3 * * *", tz="Mars/Olympus"), "unknown time zone 'Mars/Olympus'"),
        (lambda: PeriodClose(tz="Nowhere"), "unknown time zone 'Nowhere'"),
        (lambda: DataArrival(path="landing/file.csv"), "{partition}"),
        (lambda: DataArrival(sql="SELECT 1 WHERE :partition = 'x'"), "db=URL"),
        (DataArrival, "exactly one of"),
        (lambda: Upstream(pipeline="", stage="clean"), "pipeline"),
    ],
)
def test_bad_triggers_are_refused_where_they_are_declared(build: Any, fragment: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        build()
    assert fragment in str(raised.value)


def test_bad_trigger_placements_are_refused_by_add_pipeline(tmp_path: Path) -> None:
    pipeline = landing_pipeline("regional", tmp_path, Static(keys=["a"]))
    app = App("bad")
    with pytest.raises(ConfigurationError, match="not partitioned by day or month"):
        app.add_pipeline(pipeline, root=tmp_path, triggers=[PeriodClose()])
    with pytest.raises(ConfigurationError, match="names stage 'nope'"):
        app.add_pipeline(pipeline, root=tmp_path, triggers=[Cron(expr="0 3 * * *", stages=("nope",))])
    with pytest.raises(ConfigurationError, match="two triggers named 'x'"):
        app.add_pipeline(pipeline, root=tmp_path, triggers=[Cron(expr="0 3 * * *", name="x"), Cron(expr="0 4 * * *", name="x")])
    with pytest.raises(ConfigurationError, match="has no pipeline 'nope'"):
        app.get_pipeline("nope")
