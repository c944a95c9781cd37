"""Records never done, as a user meets them on the command line (SQLite, the real CLI).

The seed's day with no backlog allowed and the 03:00-04:00 outage (two replays around it), on
yesterday (UTC) so that the day is closed by the system clock: ``slots report`` names slot 3,
``status`` says UNHEALTHY and exits 1 (``--json`` too), ``slots backfill`` refuses what it cannot do
in one line, counts with ``--dry-run``, runs the 100 records once, then has nothing to do.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.cli import Result, assert_one_line_error, run_cli
from vardiya.store import open_store

APP = '''
from datetime import timedelta
from pathlib import Path

from vardiya import App, IterableSource, SlotScheme

app = App("seed")
CALLS = Path(__file__).parent / "calls.txt"

@app.slot_job("nightly_users", scheme=SlotScheme(slots=24), source=IterableSource(range(1, 2401)),
              runs_per_slot=2, offsets=[timedelta(minutes=1), timedelta(minutes=31)], backfill_limit=0)
def refresh(user_id, context):
    with CALLS.open("a") as calls:
        calls.write(f"{context.period.key} {user_id}\\n")
'''


def _json(result: Result, code: int = 0) -> dict:  # type: ignore[type-arg]
    assert result.code == code, (result.code, result.stdout, result.stderr)
    return json.loads(result.stdout)


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[list[str], str]:
    """The app, its store after yesterday's day without 03:00-04:00, and yesterday's period key."""
    (tmp_path / "jobs.py").write_text(APP)
    options = ["--app", "jobs.py:app", "--db", f"sqlite:///{tmp_path / 'v.db'}"]
    day = (datetime.now(UTC) - timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    spans = [(day, day + timedelta(hours=3)), (day + timedelta(hours=4), day + timedelta(days=1))]
    for start, end in spans:
        result = run_cli("replay", "nightly_users", "--from", start.isoformat(), "--to", end.isoformat(), "--json",
                         *options, cwd=tmp_path)
        assert result.code == 0, result.stderr
    return options, f"{day:%Y-%m-%d}"


def _calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls.txt").read_text().splitlines()


def test_a_closed_day_with_slot_3_never_done_is_reported_unhealthy_and_backfilled_once(
    tmp_path: Path, seeded: tuple[list[str], str]
) -> None:
    options, period = seeded
    report = _json(run_cli("slots", "report", "nightly_users", "--period", period, "--json", *options, cwd=tmp_path))
    assert report["not_done"] == 100 and report["closed"] is True
    assert [load["not_done"] for load in report["slots"]][:5] == [0, 0, 0, 100, 0]
    text = run_cli("slots", "report", "nightly_users", "--period", period, *options, cwd=tmp_path)
    assert text.code == 0
    assert "warning: 100 records of period" in text.stdout and "never done" in text.stdout
    assert f"vardiya slots backfill nightly_users --period {period}" in " ".join(text.stdout.split())

    status = _json(run_cli("status", "--json", *options, cwd=tmp_path), code=1)
    assert status["healthy"] is False
    assert [(e["job"], e["period"], e["not_done"], e["slots"]) for e in status["not_done"]] == [
        ("nightly_users", period, 100, {"3": 100}),
    ]
    assert status["reasons"] and "100 records of period" in status["reasons"][0]
    shown = run_cli("status", *options, cwd=tmp_path)
    assert shown.code == 1, shown.stderr
    assert "not_done" in shown.stdout and "UNHEALTHY" in shown.stdout and "healthy\n" not in shown.stdout

    before = len(_calls(tmp_path))
    dry = _json(run_cli("slots", "backfill", "nightly_users", "--period", period, "--dry-run", "--json", *options,
                        cwd=tmp_path))
    assert (dry["dry_run"], dry["not_done"], dry["slots"]) == (True, 100, [{"slot": 3, "not_done": 100}])
    dry_text = run_cli("slots", "backfill", "nightly_users", "--period", period, "--dry-run", *options, cwd=tmp_path)
    assert dry_text.code == 0 and "would run 100 records" in dry_text.stdout
    assert len(_calls(tmp_path)) == before  # nothing ran
    with sqlite3.connect(tmp_path / "v.db") as connection:
        done = connection.execute("SELECT count(*) FROM ledger WHERE period = ?", (period,)).fetchone()[0]
    assert done == 2_300

    ran = _json(run_cli("slots", "backfill", "nightly_users", "--period", period, "--json", *options, cwd=tmp_path))
    assert (ran["done"], ran["failed"], ran["still_not_done"]) == (100, 0, 0)
    calls = _calls(tmp_path)
    assert len(calls) == len(set(calls)) == 2_400  # every record of the day exactly once
    again = run_cli("slots", "backfill", "nightly_users", "--period", period, *options, cwd=tmp_path)
    assert again.code == 0 and "nothing to do" in again.stdout
    assert len(_calls(tmp_path)) == 2_400

    healthy = _json(run_cli("status", "--json", *options, cwd=tmp_path))
    assert (healthy["healthy"], healthy["not_done"], healthy["reasons"]) == (True, [], [])
    shown = run_cli("status", *options, cwd=tmp_path)
    assert shown.code == 0 and shown.stdout.rstrip().endswith("healthy") and "UNHEALTHY" not in shown.stdout


def test_bad_backfills_are_one_line_and_run_nothing(tmp_path: Path, seeded: tuple[list[str], str]) -> None:
    options, period = seeded
    today = f"{datetime.now(UTC) + timedelta(days=1):%Y-%m-%d}"  # not closed whatever the hour
    before = len(_calls(tmp_path))
    for arguments, fragments in (
        (["nope", "--period", period], ["no slot job 'nope'", "nightly_users"]),
        (["nightly_users", "--period", "yesterday"], ["'yesterday' is not a period of this scheme", "'2026-12-01'"]),
        (["nightly_users", "--period", f"{period}T03:00"], ["is not a period of this scheme"]),
        (["nightly_users", "--period", today], [f"period {today} of job 'nightly_users' is not closed", "until"]),
        (["nightly_users", "--period", today, "--dry-run"], ["is not closed"]),
    ):
        assert_one_line_error(run_cli("slots", "backfill", *arguments, *options, cwd=tmp_path), *fragments)
    assert len(_calls(tmp_path)) == before


def test_status_exit_code_follows_healthy(tmp_path: Path) -> None:
    """0 when healthy, 1 when not (a dead item), in both forms: what systemd and monitoring checks read."""
    db = f"sqlite:///{tmp_path / 'v.db'}"
    open_store(db).close()  # status reads a store, it never creates one
    assert _json(run_cli("status", "--json", "--db", db, cwd=tmp_path))["healthy"] is True
    text = run_cli("status", "--db", db, cwd=tmp_path)
    assert text.code == 0 and "healthy" in text.stdout
    with open_store(db) as store:  # one item that failed its only attempt: dead
        store.items.enqueue("call:x", {"n": 1}, max_attempts=1)
        [claimed] = store.items.claim(1, owner="w", lease=30)
        store.items.fail(claimed.id, owner="w", error="boom")
    document = _json(run_cli("status", "--json", "--db", db, cwd=tmp_path), code=1)
    assert document["healthy"] is False and document["dead"] == 1
    assert any("1 dead work items" in reason for reason in document["reasons"])
    text = run_cli("status", "--db", db, cwd=tmp_path)
    assert text.code == 1 and "UNHEALTHY" in text.stdout and "1 dead work items" in text.stdout
