"""Periodic functions and ``vardiya app show`` as a user meets them: an app file, the CLI, a SQLite store.

``app show`` lists what the app registers without opening a store; ``scheduler`` fires a periodic
function's latest planned time on its first start and ``worker --until-idle`` runs it; a bad
declaration (cron, zone, interval) is one line and exit 2 before any store exists.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import assert_one_line_error, run_cli

APP = '''
from datetime import timedelta
from pathlib import Path

from vardiya import App, IterableSource, SlotScheme
from vardiya.pipeline import Daily, Pipeline
from vardiya.schedule import Cron

app = App("shop")
ran = Path(__file__).parent / "ran.txt"

@app.slot_job("nightly_users", scheme=SlotScheme(slots=24), source=IterableSource(range(10)))
def refresh(user_id):
    pass

@app.handler("emails")
def send(record):
    pass

@app.every(timedelta(minutes=5))
def rates(planned_at):
    ran.write_text(planned_at.isoformat())

@app.cron("0 9 * * *", tz="Europe/Istanbul")
def digest():
    pass

meters = Pipeline("meters")

@meters.stage(partitions=Daily(start="2026-12-01", end="2026-12-31"))
def load(context):
    return []

app.add_pipeline(meters, root="out", triggers=[Cron(expr="0 3 * * *", tz="Europe/Istanbul")])
'''

PERIODIC_ONLY = '''
from datetime import timedelta
from vardiya import App

app = App("periodic")

@app.every({every})
def beat():
    pass
'''


def test_app_show_lists_everything_the_app_registers_without_a_store(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(APP)
    result = run_cli("app", "show", "--app", "jobs.py:app", "--json", cwd=tmp_path)
    assert result.code == 0, result.stderr
    document = json.loads(result.stdout)
    rows = {(entry["kind"], entry["name"]): entry for entry in document["entries"]}
    assert sorted(rows) == [
        ("handler", "emails"), ("periodic", "digest"), ("periodic", "rates"), ("pipeline", "meters"),
        ("slot job", "nightly_users"), ("trigger", "meters:cron-1"),
    ]
    assert rows[("periodic", "rates")]["schedule"] == "every 5 min"
    # a decorated function starts at its first decorator, as Python counts it
    line = APP.splitlines().index("@app.every(timedelta(minutes=5))") + 1
    assert rows[("periodic", "rates")]["function"] == f"jobs.py:{line} rates"
    assert rows[("periodic", "digest")]["schedule"] == "cron '0 9 * * *' in Europe/Istanbul"
    assert rows[("slot job", "nightly_users")]["schedule"] == "24 slots per 1 day in UTC, 1 tick(s) per slot"
    assert rows[("handler", "emails")]["model"].startswith("async")
    assert rows[("trigger", "meters:cron-1")]["schedule"] == "cron '0 3 * * *' in Europe/Istanbul, partition lag 1"
    assert not (tmp_path / "vardiya.db").exists()  # nothing was opened or created
    for columns in ("60", "80", "200"):
        text = run_cli("app", "show", "--app", "jobs.py:app", cwd=tmp_path, env={"COLUMNS": columns})
        assert text.code == 0
        assert all(len(line) <= int(columns) for line in text.stdout.splitlines())
        for name in ("nightly_users", "emails", "digest", "rates", "meters:cron-1", f"jobs.py:{line} rates"):
            assert name in text.stdout, (columns, text.stdout)


def test_the_scheduler_fires_a_periodic_function_and_a_worker_runs_it(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(APP)
    app = ["--app", "jobs.py:app"]
    fired = run_cli("scheduler", *app, "--only", "rates", "--steps", "1", "--json", cwd=tmp_path)
    assert fired.code == 0, fired.stderr
    assert json.loads(fired.stdout)["fired"] == 1
    assert "periodic:rates: first start on this store; fires" in fired.stderr
    ran = run_cli("worker", *app, "--only", "rates", "--until-idle", "--json", cwd=tmp_path)
    assert ran.code == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert (report["periodic_runs"], report["succeeded"]) == (1, 1)
    planned = (tmp_path / "ran.txt").read_text()
    assert planned.endswith("+00:00") and planned[14:16] in {f"{m:02d}" for m in range(0, 60, 5)}
    status = run_cli("status", *app, "--json", cwd=tmp_path)
    assert json.loads(status.stdout)["items"]["periodic"]["succeeded"] == 1


@pytest.mark.parametrize(
    ("source", "fragments"),
    [
        (APP.replace('"0 9 * * *"', '"0 25 * * *"'), ["invalid cron expression '0 25 * * *'", "five fields"]),
        (APP.replace('tz="Europe/Istanbul")\ndef digest', 'tz="Asia/Atlantis")\ndef digest'), ["unknown time zone 'Asia/Atlantis'"]),
        (PERIODIC_ONLY.format(every="timedelta(0)"), ["every must be a timedelta of at least 1 second"]),
        (PERIODIC_ONLY.format(every="300"), ["every must be a timedelta", "timedelta(minutes=5)"]),
    ],
    ids=["bad-cron", "bad-zone", "zero-interval", "interval-not-a-timedelta"],
)
@pytest.mark.parametrize("command", [["app", "show"], ["scheduler"], ["worker", "--until-idle"]])
def test_bad_periodic_declarations_are_one_line_and_exit_2(
    tmp_path: Path, source: str, fragments: list[str], command: list[str]
) -> None:
    (tmp_path / "jobs.py").write_text(source)
    result = run_cli(*command, "--app", "jobs.py:app", cwd=tmp_path)
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "vardiya.db").exists()


def test_app_show_needs_an_app(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("app", "show", cwd=tmp_path), "no app given", "--app")
