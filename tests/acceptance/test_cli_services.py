"""``vardiya scheduler``, ``vardiya worker``, ``vardiya status`` and ``vardiya pipeline triggers`` as an
operator runs them: real processes, an app file of their own, a SQLite store in ``tmp_path``.

The services are the part of vardiya that runs unattended, so what is checked here is what an operator
and their tooling rely on: a bad deployment refuses to start in one line (exit 2) before touching the
store; the scheduler fires the catch-up tick and a worker runs it, which ``status --json`` then shows
(the document a health check or a dashboard reads); ``--log-format json`` gives a log pipeline fields
instead of sentences; ``/metrics`` answers while the worker runs, and SIGTERM drains it with exit 0.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.cli import Result, assert_one_line_error, run_cli

#: The period of the slot job: 10 ticks of 30 s. The pending tick is never older than 30 s, so it is
#: not "late" (status' default --late-after is 60 s); the period is long enough to wait out its end.
PERIOD_S = 300

APP = f'''
from datetime import timedelta
from pathlib import Path

from vardiya import App, IterableSource, SlotScheme
from vardiya.pipeline import Pipeline, Static, same
from vardiya.schedule import CatchUpPolicy

app = App("services")

# grace=0: every tick of the current period before now counts as missed, so the default max_ticks=1
# fires exactly one, the latest (see test_a_new_job_fires_one_tick_with_the_default_policy).
@app.slot_job("rolling", scheme=SlotScheme(slots=10, period=timedelta(seconds={PERIOD_S})),
              deadline_grace=timedelta(seconds=60),
              source=IterableSource(range(200)), downtime=CatchUpPolicy(grace=timedelta(0)))
def rolling(record):
    pass

meters = Pipeline("meters")

@meters.stage(partitions=Static(keys=["north", "south"]))
def load(context):
    return [{{"meter": context.partition, "kwh": 1.5}}]

@meters.stage(partitions=Static(keys=["north", "south"]), depends_on={{"load": same()}})
def anomalies(context):
    return []  # nothing found: a green run over nothing, which `pipeline triggers` names

app.add_pipeline(meters, root=Path(__file__).parent / "out")
'''

_PIPELINE_APP = '''
from vardiya import App
from vardiya.pipeline import Pipeline, Static
from vardiya.schedule import Cron

app = App("bad")
nightly = Pipeline("nightly")

@nightly.stage(partitions=Static(keys=["a"]))
def only(context):
    return []

app.add_pipeline(nightly, root="out", triggers=[{trigger}])
'''

BAD_APPS = {
    "cron": _PIPELINE_APP.format(trigger='Cron(expr="61 * * * *")'),
    "cron-zone": _PIPELINE_APP.format(trigger='Cron(expr="0 3 * * *", tz="Mars/Olympus")'),
    "scheme-zone": '''
from datetime import timedelta
from vardiya import App, IterableSource, SlotScheme

app = App("bad")

@app.slot_job("rolling", scheme=SlotScheme(slots=6, period=timedelta(seconds=60), tz="Mars/Olympus"),
              deadline_grace=timedelta(seconds=60),
              source=IterableSource(range(10)))
def rolling(record):
    pass
''',
    "empty": '''
from vardiya import App

app = App("empty")
''',
    # The seed's step declared without run times of its own: :31 does not fit a 30-minute slot.
    "scheme-change": '''
from datetime import datetime, timedelta, timezone
from vardiya import App, IterableSource, SchemeChange, SlotScheme

app = App("bad")

@app.slot_job("nightly_users", scheme=SlotScheme(slots=24), source=IterableSource(range(10)), runs_per_slot=2,
              offsets=[timedelta(minutes=1), timedelta(minutes=31)],
              scheme_changes=[SchemeChange(effective_from=datetime(2026, 12, 2, tzinfo=timezone.utc),
                                           scheme=SlotScheme(slots=48))])
def refresh(record):
    pass
''',
}

STATUS_KEYS = {
    "now", "store", "late_after_s", "items", "due", "late", "running", "failed", "dead", "late_items", "jobs",
    "pipelines", "schedules", "healthy", "behind", "not_done", "reasons", "sla_missed", "paused", "services",
    "services_alive",
}
FAMILY_KEYS = {"pending", "running", "succeeded", "failed", "dead", "due", "late"}
JOB_KEYS = {
    "job", "planned_through", "next_tick", "fired", "skipped", "last_tick", "lateness_p50_s", "lateness_p99_s",
    "lateness_ticks", "period", "done", "failed_records", "behind_s", "paused",
}
PIPELINE_KEYS = {"pipeline", "tasks", "stale", "triggers", "paused"}
SCHEDULE_KEYS = {"name", "planned_through", "fired", "skipped"}
TICK_RESULT_KEYS = {
    "job", "period", "slot", "planned_at", "already_done", "started", "backlog", "held", "done", "failed",
    "cut", "lateness_s", "started_at", "stop_at", "finished_at", "attempt",
}
LOG_KEYS = {"ts", "level", "logger", "message"}


@pytest.fixture
def project(tmp_path: Path) -> list[str]:
    (tmp_path / "jobs.py").write_text(APP)
    return ["--app", "jobs.py:app", "--db", f"sqlite:///{tmp_path / 'v.db'}"]


def _json(result: Result) -> dict:  # type: ignore[type-arg]
    assert result.code == 0, (result.code, result.stdout, result.stderr)
    return json.loads(result.stdout)  # exactly one document: json.loads refuses anything after it


def _rows(db: Path, *tables: str) -> dict[str, int]:
    with sqlite3.connect(db) as connection:
        return {table: connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in tables}


def _assert_nothing_written(db: Path) -> None:
    """A refused command left no state: no store file, or (a store opened first) not one row in it."""
    if db.exists():
        assert _rows(db, "work_items", "schedules", "ledger", "pipeline_runs") == {
            "work_items": 0, "schedules": 0, "ledger": 0, "pipeline_runs": 0,
        }


def _clear_of_period_end(margin_s: float = 15.0) -> None:
    """Wait for the next period if this one ends within ``margin_s``: the ledger figures of status are
    those of the period *now*, so a period that closes mid-test would show the next one's (empty)."""
    remaining = PERIOD_S - time.time() % PERIOD_S  # sub-day periods align to midnight UTC: to the epoch
    if remaining < margin_s:
        time.sleep(remaining + 0.5)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- bad input: one line, exit 2, nothing in the store --------------------------------------------------


@pytest.mark.parametrize(
    ("app", "arguments", "fragments"),
    [
        ("cron", ["scheduler"], ["invalid cron expression '61 * * * *'", "five fields", "'0 3 * * *'"]),
        ("cron-zone", ["scheduler"], ["unknown time zone 'Mars/Olympus'", "IANA name"]),
        ("scheme-zone", ["scheduler"], ["unknown time zone 'Mars/Olympus'", "'UTC'"]),
        ("jobs", ["scheduler", "--only", "nope"], ["no slot job, pipeline or periodic function 'nope'", "rolling", "meters"]),
        ("jobs", ["pipeline", "triggers", "nope"], ["no pipeline 'nope'", "meters"]),
        ("jobs", ["status", "--late-after", "-1"], ["--late-after must be 0 or more seconds"]),
        ("jobs", ["status", "--closed-periods", "-1"], ["--closed-periods must be 0 or more"]),
        ("jobs", ["worker", "--metrics-port", "70000"], ["--metrics-port 70000 is not a port", "1 to 65535"]),
        ("jobs", ["worker", "--lease", "0"], ["--lease must be more than 0 seconds"]),
        ("jobs", ["worker", "--lease", "inf"], ["--lease must be a finite number of seconds"]),
        ("jobs", ["worker", "--concurrency", "0"], ["concurrency must be a whole number of at least 1"]),
        ("jobs", ["worker", "--prefetch", "0"], ["prefetch must be a whole number of at least 1"]),
        ("jobs", ["scheduler", "--log-format", "xml"], ["'xml' is not one of", "'text'", "'json'"]),
        ("jobs", ["scheduler", "--poll-max", "0"], ["--poll-max must be more than 0"]),
        ("empty", ["worker", "--until-idle"], ["declares no handlers, slot jobs, pipelines or periodic functions", "@app.handler"]),
        ("empty", ["scheduler", "--steps", "1"], ["nothing to schedule", "a periodic function (@app.every / @app.cron) or a pipeline with triggers"]),
        *(
            ("scheme-change", command, ["'nightly_users'", "offset 31 min is outside the 30 min slot of the 48-slot scheme from 2026-12-02"])
            for command in (["scheduler"], ["status"], ["replay", "nightly_users", "--from", "2026-12-01T00:00Z", "--to", "2026-12-03T00:00Z"])
        ),
    ],
    ids=[
        "invalid-cron", "unknown-cron-zone", "unknown-scheme-zone", "unknown-only", "unknown-pipeline",
        "negative-late-after", "negative-closed-periods", "port-out-of-range", "zero-lease", "infinite-lease",
        "zero-concurrency", "zero-prefetch", "unknown-log-format", "zero-poll-max", "worker-nothing-to-run",
        "scheduler-nothing-to-schedule", "bad-scheme-change-scheduler", "bad-scheme-change-status",
        "bad-scheme-change-replay",
    ],
)
def test_bad_service_input_is_one_line_and_writes_nothing(
    tmp_path: Path, app: str, arguments: list[str], fragments: list[str]
) -> None:
    """A service that cannot do what it was told must refuse at start, in one line that names the fix,
    not crash-loop under a supervisor or half-run: exit 2, and the store is left as it was."""
    (tmp_path / "jobs.py").write_text(APP if app == "jobs" else BAD_APPS[app])
    db = tmp_path / "v.db"
    result = run_cli(*arguments, "--app", "jobs.py:app", "--db", f"sqlite:///{db}", cwd=tmp_path)
    assert_one_line_error(result, *fragments)
    _assert_nothing_written(db)


def test_a_metrics_port_in_use_is_one_line(tmp_path: Path, project: list[str]) -> None:
    """Two workers on one host given the same port: the second says so and exits, instead of running
    without the endpoint its alerts depend on."""
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("worker", "--until-idle", "--metrics-port", str(port), *project, cwd=tmp_path)
    assert_one_line_error(result, f"--metrics-port {port} cannot be served", "pick a free port")
    _assert_nothing_written(tmp_path / "v.db")


# -- scheduler, status, worker ------------------------------------------------------------------------


def test_scheduler_fires_the_catch_up_tick_a_worker_runs_it_and_status_shows_both(
    tmp_path: Path, project: list[str]
) -> None:
    """The whole loop an operator watches: the scheduler enqueues the one tick the policy fires, status
    sees it pending and healthy, a worker runs it, status then shows its lateness and the ledger's work."""
    _clear_of_period_end()
    fired = _json(run_cli("scheduler", "--steps", "1", "--lead", "0", "--json", *project, cwd=tmp_path))
    assert set(fired) == {"steps", "fired", "skipped"}
    assert (fired["steps"], fired["fired"]) == (1, 1)
    assert 0 <= fired["skipped"] <= 9  # the earlier ticks of this period, passed by (their backlog is taken)

    before = _json(run_cli("status", "--json", *project, cwd=tmp_path))
    assert set(before) == STATUS_KEYS
    assert set(before["items"]) == {"tick"} and set(before["items"]["tick"]) == FAMILY_KEYS
    assert before["items"]["tick"]["pending"] == 1 and before["items"]["tick"]["due"] == 1
    assert (before["due"], before["late"], before["dead"], before["late_items"]) == (1, 0, 0, [])
    assert before["healthy"] is True
    assert before["store"].endswith("v.db") and before["late_after_s"] == 60.0
    [job] = before["jobs"]
    assert set(job) == JOB_KEYS
    assert (job["job"], job["fired"], job["skipped"], job["last_tick"], job["done"]) == (
        "rolling", 1, fired["skipped"], None, 0,
    )
    assert job["next_tick"] is not None and job["next_tick"] > job["planned_through"]
    [pipeline] = before["pipelines"]
    assert set(pipeline) == PIPELINE_KEYS and pipeline["pipeline"] == "meters" and pipeline["triggers"] == []
    [schedule] = before["schedules"]
    assert set(schedule) >= SCHEDULE_KEYS
    assert (schedule["name"], schedule["fired"], schedule["planned_through"]) == (
        "tick:rolling", 1, job["planned_through"],
    )

    worked = _json(run_cli("worker", "--until-idle", "--json", *project, cwd=tmp_path))
    assert (worked["ticks"], worked["succeeded"], worked["dead"], worked["pipeline_runs"]) == (1, 1, 0, 0)

    after = _json(run_cli("status", "--json", *project, cwd=tmp_path))
    assert after["items"]["tick"]["succeeded"] == 1
    assert (after["items"]["tick"]["pending"], after["due"]) == (0, 0)
    assert after["healthy"] is True
    [job] = after["jobs"]
    tick = job["last_tick"]
    assert set(tick) >= TICK_RESULT_KEYS
    assert tick["planned_at"] == job["planned_through"]  # the tick ran for its planned time, not for "now"
    assert 0 <= tick["lateness_s"] < PERIOD_S
    assert job["lateness_ticks"] == 1 and job["lateness_p50_s"] == tick["lateness_s"]
    assert tick["period"] == job["period"]
    assert (tick["failed"], tick["already_done"], tick["held"]) == (0, 0, 0)
    assert tick["done"] > 0
    assert tick["done"] == tick["started"] + tick["backlog"]  # its slot, then the period's backlog
    assert job["done"] == tick["done"]  # the ledger agrees with the tick's own report
    assert job["failed_records"] == 0


def test_a_new_job_fires_one_tick_with_the_default_policy(tmp_path: Path) -> None:
    """A job that never ran has missed nothing before the current period, of which the default policy
    fires the latest tick (``TickSchedule.origin``): one tick, however short the slots (``--lead 0``:
    with the default lead the tick due within the next second is enqueued ahead too)."""
    (tmp_path / "jobs.py").write_text('''
from datetime import timedelta
from vardiya import App, IterableSource, SlotScheme

app = App("default-policy")

@app.slot_job("rolling", scheme=SlotScheme(slots=60, period=timedelta(seconds=60)), source=IterableSource(range(60)))
def rolling(record):
    pass
''')
    second = time.time() % 60  # keep clear of the minute's first tick: at least two ticks must be due
    if second > 57:
        time.sleep(60 - second + 2)
    elif second < 2:
        time.sleep(2 - second)
    result = run_cli(
        "scheduler", "--steps", "1", "--lead", "0", "--json", "--app", "jobs.py:app",
        "--db", f"sqlite:///{tmp_path / 'v.db'}", cwd=tmp_path,
    )
    assert _json(result)["fired"] == 1


def test_scheduler_and_worker_log_json_lines(tmp_path: Path, project: list[str]) -> None:
    """With --log-format json every stderr line is an object a log pipeline indexes: the fired tick
    carries its kind, key and planned time, the tick run its lateness, with no sentence to parse."""
    scheduled = run_cli("scheduler", "--steps", "1", "--lead", "0", "--log-format", "json", *project, cwd=tmp_path)
    assert scheduled.code == 0, scheduled.stderr
    assert "fired 1" in scheduled.stdout  # the report for people stays on stdout
    lines = [json.loads(line) for line in scheduled.stderr.splitlines() if line.strip()]
    assert lines and all(set(line) >= LOG_KEYS for line in lines)
    assert all(line["logger"].startswith("vardiya.") for line in lines)
    [fired] = [line for line in lines if line["message"].startswith("fired ")]
    assert (fired["level"], fired["logger"], fired["kind"]) == ("info", "vardiya.scheduler", "tick:rolling")
    assert fired["planned_at"] and fired["key"]
    assert fired["key"].startswith(fired["planned_at"][:19])  # the key is the planned instant, in UTC

    worked = run_cli("worker", "--until-idle", "--json", "--log-format", "json", *project, cwd=tmp_path)
    assert worked.code == 0, worked.stderr
    assert json.loads(worked.stdout)["ticks"] == 1
    records = [json.loads(line) for line in worked.stderr.splitlines() if line.strip()]
    assert all(set(record) >= LOG_KEYS for record in records)
    [ran] = [record for record in records if record.get("job") == "rolling" and "lateness_s" in record]
    assert ran["planned_at"] == fired["planned_at"] and ran["done"] > 0


# -- pipeline triggers --------------------------------------------------------------------------------


def test_pipeline_triggers_counts_a_run_by_hand_and_names_the_empty_stage(tmp_path: Path, project: list[str]) -> None:
    """Who started each task, and which succeeded over nothing: a run by hand counts as ``manual``, and
    a stage that returned no rows is listed, instead of hiding in a green run."""
    db = project[2:]
    ran = _json(run_cli("pipeline", "run", "jobs.py:meters", *db, "--json", cwd=tmp_path))
    assert len(ran["succeeded"]) == 4

    report = _json(run_cli("pipeline", "triggers", "jobs.py:meters", *db, "--json", cwd=tmp_path))
    assert set(report) == {"pipeline", "tasks", "runs", "empty"}
    assert (report["pipeline"], report["runs"]) == ("meters", 4)
    assert list(report["tasks"]) == ["load@north", "load@south", "anomalies@north", "anomalies@south"]
    for name, task in report["tasks"].items():
        assert (task["count"], task["by_trigger"]) == (1, {"manual": 1}), name
        [attempt] = task["runs"]
        assert (attempt["run_id"], attempt["state"], attempt["planned_at"]) == (ran["run_id"], "succeeded", None)
        assert task["empty_runs"] == (1 if name.startswith("anomalies@") else 0)
    assert report["tasks"]["load@north"]["runs"][0]["rows"] == 1
    assert report["empty"] == ["anomalies@north", "anomalies@south"]

    by_name = _json(run_cli("pipeline", "triggers", "meters", *project, "--json", cwd=tmp_path))
    assert by_name == report  # PIPE may also be the name of one of the --app's pipelines

    people = run_cli("pipeline", "triggers", "jobs.py:meters", *db, cwd=tmp_path)
    assert people.code == 0, people.stderr
    assert "manual" in people.stdout and "empty runs" in people.stdout and "anomalies@south" in people.stdout


# -- Prometheus ---------------------------------------------------------------------------------------


def _scrape(url: str, wanted: list[str], within_s: float = 15.0) -> str:
    """The /metrics text once it holds every line of ``wanted`` (the worker starts, then runs the tick)."""
    deadline = time.monotonic() + within_s
    text = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                text = response.read().decode()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            text = ""
        if text and all(line in text for line in wanted):
            return text
        time.sleep(0.2)
    raise AssertionError(f"{url} never showed {wanted}; last answer:\n{text}")


def test_worker_serves_prometheus_metrics_and_drains_on_sigterm(tmp_path: Path, project: list[str]) -> None:
    """The endpoint answers while the worker runs, with the store's queue (work items by state) and what
    the worker did (ticks run); SIGTERM, as a supervisor stops it, ends it with exit 0."""
    assert _json(run_cli("scheduler", "--steps", "1", "--lead", "0", "--json", *project, cwd=tmp_path))["fired"] == 1
    port = _free_port()
    environment = {key: value for key, value in os.environ.items() if key not in ("VARDIYA_DB", "VARDIYA_APP")}
    with (tmp_path / "worker.out").open("w") as out, (tmp_path / "worker.err").open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "vardiya", "worker", "--metrics-port", str(port), "--json", *project],
            cwd=tmp_path, env=environment, stdout=out, stderr=err,
        )
        try:
            text = _scrape(
                f"http://127.0.0.1:{port}/metrics",
                ['vardiya_ticks_total{job="rolling"} 1.0', 'vardiya_work_items{family="tick",state="succeeded"} 1.0'],
            )
            assert "# TYPE vardiya_work_items gauge" in text
            assert "# TYPE vardiya_ticks_total counter" in text  # prometheus_client names counters *_total
            assert 'vardiya_tick_lateness_seconds_count{job="rolling"} 1.0' in text
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=10)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert code == 0, (tmp_path / "worker.err").read_text()
    assert json.loads((tmp_path / "worker.out").read_text())["ticks"] == 1  # the drained worker still reports
