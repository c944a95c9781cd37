"""What failed and why, through the CLI (issue 16): the tick's failures summary, ``vardiya errors``,
``dlq show`` tracebacks, an app that does not import, ``--debug``, and SLA misses in status and metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from tests.support.cli import assert_one_line_error, run_cli
from vardiya.service.metrics import ServiceMetrics
from vardiya.store import open_store

APP = '''
from datetime import timedelta
from vardiya import App, IterableSource, SlotScheme
from vardiya.invoke.retry import FixedWait, RetryPolicy

app = App("test")
SETTINGS = {}

def lookup(user_id):
    return SETTINGS["db"] if user_id % 3 == 0 else None

@app.slot_job("nightly", scheme=SlotScheme(slots=1), source=IterableSource(range(1, 31)), backfill_limit=0,
              sla=timedelta(microseconds=1))
def refresh(user_id, context):
    lookup(user_id)
    if user_id == 10:
        raise TimeoutError("feed slow")

@app.handler("charge", retry=RetryPolicy(max_attempts=2, wait=FixedWait(seconds=0)))
def charge(record, context):
    raise ValueError("card declined")
'''


@pytest.fixture
def project(tmp_path: Path) -> list[str]:
    (tmp_path / "jobs.py").write_text(APP)
    return ["--app", "jobs.py:app", "--db", f"sqlite:///{tmp_path / 'vardiya.db'}"]


def _tick(tmp_path: Path, project: list[str], *extra: str):  # type: ignore[no-untyped-def]
    return run_cli(*project, "tick", "nightly", "--at", "2026-12-01T00:05Z", "--outside-window", *extra, cwd=tmp_path)


def test_a_failing_tick_ends_with_its_failures_summary(tmp_path: Path, project: list[str]) -> None:
    result = _tick(tmp_path, project)
    assert result.code == 1, result.stderr
    out = result.stdout
    assert "failures: 11 record(s)" in out
    assert "10  KeyError: 'db'" in out and "1  TimeoutError: feed slow" in out
    assert "record 3 (period 2026-12-01): KeyError: 'db'" in out
    assert "vardiya errors --job nightly --traceback" in out
    # the SLA miss is logged with both durations
    assert "sla missed: job nightly (tick 2026-12-01T00:05:00+00:00) took" in result.stderr
    assert "over its sla of 0.000 s" in result.stderr


def test_tick_and_replay_json_carry_a_failures_object(tmp_path: Path, project: list[str]) -> None:
    document = json.loads(_tick(tmp_path, project, "--json").stdout)
    failures = document["failures"]
    assert failures["count"] == 11
    assert failures["by_error"][0] == {"error": "KeyError: 'db'", "count": 10}
    assert [entry["record"] for entry in failures["first"]] == ["3", "6", "9", "10", "12"]
    assert failures["more"] == "vardiya errors --job nightly --traceback"
    assert document["sla_missed_s"] > 0
    replayed = run_cli(
        *project, "replay", "nightly", "--from", "2026-12-02T00:00Z", "--to", "2026-12-03T00:00Z", "--json", cwd=tmp_path
    )
    assert replayed.code == 1, replayed.stderr
    assert json.loads(replayed.stdout)["failures"]["count"] == 11


def test_errors_lists_failures_with_tracebacks_and_dlq_show_prints_them(tmp_path: Path, project: list[str]) -> None:
    _tick(tmp_path, project)
    listed = run_cli(*project, "errors", "--job", "nightly", "--limit", "3", cwd=tmp_path)
    assert listed.code == 0, listed.stderr
    assert "KeyError: 'db'" in listed.stdout and "2026-12-01/" in listed.stdout
    shown = run_cli(*project, "errors", "--job", "nightly", "--traceback", "--limit", "1", cwd=tmp_path)
    assert "Traceback (most recent call last):" in shown.stdout
    assert 'return SETTINGS["db"]' in shown.stdout and "in lookup" in shown.stdout
    document = json.loads(run_cli(*project, "errors", "--since", "3650d", "--json", cwd=tmp_path).stdout)
    assert len(document["failures"]) == 11
    assert all(entry["traceback"] for entry in document["failures"])
    assert json.loads(run_cli(*project, "errors", "--handler", "charge", "--json", cwd=tmp_path).stdout)["failures"] == []

    assert run_cli(*project, "invoke", "submit", "charge", "--payload", '{"card": 1}', cwd=tmp_path).code == 0
    assert run_cli(*project, "worker", "--until-idle", cwd=tmp_path).code == 0
    dead = json.loads(run_cli(*project, "dlq", "list", "--json", cwd=tmp_path).stdout)
    item = dead["dead_letters"][0]["id"] if isinstance(dead, dict) else dead[0]["id"]
    letter = run_cli(*project, "dlq", "show", str(item), cwd=tmp_path)
    assert letter.code == 0, letter.stderr
    assert letter.stdout.count("ValueError: card declined") >= 2
    assert "attempt 1 traceback:" in letter.stdout and "attempt 2 traceback:" in letter.stdout
    history = json.loads(run_cli(*project, "dlq", "show", str(item), "--json", cwd=tmp_path).stdout)["history"]
    assert all("in charge" in attempt["traceback"] for attempt in history)


def test_status_and_metrics_show_sla_misses(tmp_path: Path, project: list[str]) -> None:
    _tick(tmp_path, project)
    status = run_cli(*project, "status", "--json", cwd=tmp_path)
    (missed,) = json.loads(status.stdout)["sla_missed"]
    assert (missed["family"], missed["name"], missed["missed"]) == ("job", "nightly", 1)
    assert missed["last_took_s"] > missed["expected_s"]
    text = run_cli(*project, "status", cwd=tmp_path, env={"COLUMNS": "200"})
    assert "sla_missed" in text.stdout and "nightly" in text.stdout
    with open_store(f"sqlite:///{tmp_path / 'vardiya.db'}") as store:
        metrics = ServiceMetrics()
        metrics.watch(store)
        exported = generate_latest(metrics.registry).decode()
    assert 'vardiya_sla_missed_total{family="job",name="nightly"} 1.0' in exported


def test_an_app_that_does_not_import_names_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text('import os\nCONFIG = {}\n\nDB = CONFIG["db"]\n')
    result = run_cli("--app", "broken.py:app", "status", "--db", f"sqlite:///{tmp_path / 'v.db'}", cwd=tmp_path)
    assert_one_line_error(result, "does not import: KeyError: 'db' (broken.py:4, in <module>)", "--debug")
    debug = run_cli("--debug", "--app", "broken:app", "status", "--db", f"sqlite:///{tmp_path / 'v.db'}", cwd=tmp_path)
    assert debug.code == 2
    assert "Traceback (most recent call last):" in debug.stderr and 'DB = CONFIG["db"]' in debug.stderr
    assert debug.stderr.strip().splitlines()[-1].startswith("vardiya: error: ")
    assert debug.stdout == ""


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["errors", "--job", "a", "--handler", "b"], ["at most one of --job, --handler and --pipeline"]),
        (["errors", "--since", "yesterday"], ["--since 'yesterday' is not an ISO 8601 time"]),
        (["errors", "--since", "5x"], ["--since"]),
        (["errors", "--limit", "0"], ["--limit 0 is out of range", "1 to 10000"]),
    ],
)
def test_errors_refuses_bad_options_in_one_line(tmp_path: Path, project: list[str], args: list[str], fragments: list[str]) -> None:
    _tick(tmp_path, project)
    assert_one_line_error(run_cli(*project, *args, cwd=tmp_path), *fragments)


def test_errors_refuses_a_missing_store(tmp_path: Path) -> None:
    result = run_cli("errors", "--db", f"sqlite:///{tmp_path / 'missing.db'}", cwd=tmp_path)
    assert_one_line_error(result, "no vardiya store at")
    assert not (tmp_path / "missing.db").exists()
