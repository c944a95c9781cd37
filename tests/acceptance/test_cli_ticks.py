"""``vardiya tick`` and ``vardiya replay`` as a user runs them, with an app file of their own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import assert_one_line_error, run_cli

APP = '''
from datetime import timedelta
from vardiya import App, IterableSource, SlotScheme

app = App("test")

@app.slot_job("nightly", scheme=SlotScheme(slots=24, tz="Europe/Istanbul"), source=IterableSource(range(1, 481)),
              runs_per_slot=2, offsets=[timedelta(minutes=1), timedelta(minutes=31)], backfill_limit=0)
def refresh(user_id, context):
    if user_id == 38 and context.planned_at.minute == 1:
        raise TimeoutError("flaky")

not_an_app = 42
'''

#: One set of words for a tick: the table's columns, the JSON keys, the demo and the README.
WORDS = ["already_done", "started", "backlog", "held", "done", "failed", "cut"]
TICK_KEYS = {
    "job", "period", "slot", "planned_at", "started_at", "stop_at", "finished_at", "lateness_s", "failures", "sla_missed_s",
    *WORDS,
}


@pytest.fixture
def project(tmp_path: Path) -> list[str]:
    (tmp_path / "jobs.py").write_text(APP)
    return ["--app", "jobs.py:app", "--db", f"sqlite:///{tmp_path / 'vardiya.db'}"]


def test_tick_processes_the_planned_slot_and_reports_json(tmp_path: Path, project: list[str]) -> None:
    # A past slot run by hand: --outside-window, or the slot's window (long gone) would stop it at once.
    result = run_cli(
        *project, "tick", "nightly", "--at", "2026-12-01T14:01+03:00", "--outside-window", "--json", cwd=tmp_path
    )
    assert result.code == 1, result.stderr  # user 38 failed: the work ran and some of it failed
    document = json.loads(result.stdout)
    assert set(document) == TICK_KEYS
    assert (document["period"], document["slot"]) == ("2026-12-01", 14)
    assert (document["started"], document["done"], document["failed"], document["cut"]) == (20, 19, 1, None)

    again = run_cli(*project, "tick", "nightly", "--at", "2026-12-01T14:31", "--outside-window", "--json", cwd=tmp_path)
    assert again.code == 0, again.stderr  # a naive time is read in the job's zone
    second = json.loads(again.stdout)
    assert (second["slot"], second["already_done"], second["started"], second["done"]) == (14, 19, 1, 1)


def test_a_tick_after_its_slot_window_starts_nothing_and_says_why(tmp_path: Path, project: list[str]) -> None:
    result = run_cli(*project, "tick", "nightly", "--at", "2020-06-01T14:01+03:00", "--json", cwd=tmp_path)
    assert result.code == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["started"], document["done"], document["cut"]) == (0, 0, "window")
    assert document["stop_at"] == "2020-06-01T15:00:00+03:00"  # the end of slot 14's window
    table = run_cli(*project, "tick", "nightly", "--at", "2020-06-01T14:01+03:00", cwd=tmp_path)
    assert "window of slot 14 closed at 2020-06-01 15:00:00" in table.stdout and "--outside-window" in table.stdout


def test_replay_fires_every_planned_tick_in_order(tmp_path: Path, project: list[str]) -> None:
    result = run_cli(
        *project, "replay", "nightly", "--from", "2026-12-01T00:00+03:00", "--to", "2026-12-02T00:00+03:00",
        "--json", cwd=tmp_path,
    )
    assert result.code == 0, result.stderr
    document = json.loads(result.stdout)
    assert len(document["ticks"]) == 48
    planned = [tick["planned_at"] for tick in document["ticks"]]
    assert planned == sorted(planned)
    assert (document["done"], document["failed"], document["still_failed"]) == (480, 1, 0)
    assert (document["started"], document["backlog"]) == (481, 0)
    assert all(set(tick) == TICK_KEYS for tick in document["ticks"])


def test_people_output_is_a_table(tmp_path: Path, project: list[str]) -> None:
    result = run_cli(
        *project, "tick", "nightly", "--at", "2026-12-01T05:01+03:00", "--outside-window", cwd=tmp_path,
        env={"COLUMNS": "200"},  # wide enough that no header wraps
    )
    assert result.code == 0, result.stderr
    assert "2026-12-01 05:01" in result.stdout
    header = next(line for line in result.stdout.splitlines() if "planned" in line)
    assert [word for word in WORDS if word in header] == WORDS  # the columns carry the JSON's words, in order


@pytest.mark.parametrize(
    ("arguments", "fragments"),
    [
        (["tick", "nightly", "--at", "tomorrow"], ["not an ISO 8601 time"]),
        (["tick", "nightly", "--at", "2026-03-27T00:30:00"], []),  # valid in Istanbul: checked below
        (["tick", "daily", "--at", "2026-12-01T05:01Z"], ["no slot job 'daily'", "nightly"]),
        (["replay", "nightly", "--from", "2026-12-02T00:00Z", "--to", "2026-12-01T00:00Z"], ["is not after"]),
    ],
    ids=["bad-time", "naive-ok", "unknown-job", "backwards-range"],
)
def test_bad_tick_input(tmp_path: Path, project: list[str], arguments: list[str], fragments: list[str]) -> None:
    result = run_cli(*project, *arguments, cwd=tmp_path)
    if not fragments:
        assert result.code == 0, result.stderr
        return
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "vardiya.db").exists()


@pytest.mark.parametrize(
    ("app", "fragments"),
    [
        (None, ["no app given", "--app"]),
        ("missing.py:app", ["no such file"]),
        ("jobs.py:nothing", ["has no attribute 'nothing'"]),
        ("jobs.py:not_an_app", ["not a vardiya App"]),
        ("jobs.py", ["MODULE_OR_FILE:ATTR"]),
        ("no_such_module_here:app", ["no module named"]),
    ],
)
def test_app_that_does_not_load(tmp_path: Path, app: str | None, fragments: list[str]) -> None:
    (tmp_path / "jobs.py").write_text(APP)
    options = ["--app", app] if app else []
    result = run_cli(*options, "tick", "nightly", "--at", "2026-12-01T05:01Z", cwd=tmp_path)
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "vardiya.db").exists()


def test_app_that_raises_on_import(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("raise RuntimeError('config missing')\n")
    result = run_cli("--app", "broken.py:app", "tick", "nightly", "--at", "2026-12-01T05:01Z", cwd=tmp_path)
    assert_one_line_error(result, "does not import", "config missing")
