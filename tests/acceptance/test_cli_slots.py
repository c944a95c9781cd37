"""``vardiya slots ...`` as a user runs it: JSON shapes of cli.md, tables for people, one-line errors."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.support.cli import Result, assert_one_line_error, run_cli

BALANCE_FIELDS = {
    "slots", "assign", "total", "mean", "min", "max", "spread", "max_over_min", "max_dev_pct",
    "min_dev_pct", "counts", "empty_slots", "warnings", "recommendation",
}
AT_FIELDS = {"period", "slot", "window_start", "window_end"}
WHICH_FIELDS = {"slot", "window_start", "window_end"}
MIGRATE_FIELDS = {"total", "moved", "moved_pct", "effective_from", "max_gap", "min_gap"}
INDEX_FIELDS = {"column", "index", "created", "plan", "uses_index"}
REPORT_FIELDS = {"period", "slots", "warnings"}
REPORT_SLOT_FIELDS = {"slot", "count", "rows", "bytes", "p50_ms", "p95_ms", "max_ms", "overrun"}

APP = '''
from vardiya.app import App
from vardiya.slots.job import RecordResult
from vardiya.slots.scheme import SlotScheme
from vardiya.slots.sources import IterableSource

app = App("report-test")


@app.slot_job("nightly", scheme=SlotScheme(slots=24), source=IterableSource(range(1, 241)), max_attempts=1)
def refresh(record_id, context):
    if record_id in (100, 200):
        raise RuntimeError(f"record {record_id} is broken")
    return RecordResult(rows=record_id % 3, bytes=10 * record_id)
'''


def run_json(*args: str, cwd: Path) -> dict[str, object]:
    result = run_cli(*args, "--json", cwd=cwd)
    assert result.code == 0, (result.stdout, result.stderr)
    document = json.loads(result.stdout)
    assert isinstance(document, dict)
    return document


def run_with_stdin(*args: str, cwd: Path, stdin: str) -> Result:
    """Like ``run_cli``, feeding ``stdin`` (run_cli does not take input)."""
    environment = {key: value for key, value in os.environ.items() if key not in ("VARDIYA_DB", "VARDIYA_APP")}
    completed = subprocess.run(
        [sys.executable, "-m", "vardiya", *args], cwd=cwd, env=environment, input=stdin,
        capture_output=True, text=True, timeout=120, check=False,
    )
    return Result(completed.returncode, completed.stdout, completed.stderr)


def write_ids(path: Path, ids: object) -> Path:
    path.write_text("".join(f"{record}\n" for record in ids), encoding="utf-8")  # type: ignore[attr-defined]
    return path


# -- balance --------------------------------------------------------------------------------------


def test_balance_of_the_source_example(tmp_path: Path) -> None:
    ids = write_ids(tmp_path / "ids.txt", range(1, 28_743))
    document = run_json("slots", "balance", "--slots", "24", "--ids", str(ids), cwd=tmp_path)
    assert set(document) >= BALANCE_FIELDS
    assert document["total"] == 28_742 and document["slots"] == 24 and document["assign"] == "mod"
    assert document["mean"] == pytest.approx(1197.58, abs=0.005)
    assert document["max"] - document["min"] <= 1  # type: ignore[operator]
    assert document["spread"] == 1
    counts = document["counts"]
    assert isinstance(counts, list) and len(counts) == 24 and sum(counts) == 28_742
    assert document["empty_slots"] == [] and document["warnings"] == []
    assert str(document["recommendation"]).endswith("keep mod")


def test_balance_reads_stdin_by_default_and_warns_about_patterns(tmp_path: Path) -> None:
    even = "".join(f"{2 * n}\n" for n in range(1000))
    result = run_with_stdin("slots", "balance", "--slots", "24", "--json", cwd=tmp_path, stdin=even)
    assert result.code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["total"] == 1000
    assert document["empty_slots"] == list(range(1, 24, 2))
    assert any("even" in warning for warning in document["warnings"])
    assert "use hash" in document["recommendation"]


def test_balance_for_people_and_with_hash(tmp_path: Path) -> None:
    ids = write_ids(tmp_path / "ids.txt", [f"user-{n}" for n in range(500)])
    result = run_cli("slots", "balance", "--slots", "10", "--assign", "hash", "--ids", str(ids), cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "records per slot" in result.stdout and "recommendation:" in result.stdout
    document = run_json("slots", "balance", "--slots", "10", "--assign", "hash", "--ids", str(ids), cwd=tmp_path)
    assert document["assign"] == "hash" and document["total"] == 500


def test_balance_bad_input(tmp_path: Path) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("1\n2\nuser-3\n4\n", encoding="utf-8")
    assert_one_line_error(
        run_cli("slots", "balance", "--slots", "24", "--ids", str(ids), cwd=tmp_path), "line 3", "user-3", "hash"
    )
    assert_one_line_error(
        run_cli("slots", "balance", "--slots", "0", "--ids", str(ids), cwd=tmp_path), "--slots", "positive"
    )
    assert_one_line_error(
        run_cli("slots", "balance", "--slots", "24", "--ids", str(tmp_path / "missing.txt"), cwd=tmp_path),
        "missing.txt",
    )
    assert_one_line_error(run_cli("slots", "balance", "--slots", "24", "--assign", "md5", cwd=tmp_path), "md5")


# -- at and which ---------------------------------------------------------------------------------


def test_at_a_time(tmp_path: Path) -> None:
    document = run_json("slots", "at", "2026-12-01T14:59:59Z", "--slots", "24", cwd=tmp_path)
    assert set(document) >= AT_FIELDS
    assert document["period"] == "2026-12-01" and document["slot"] == 14
    assert document["window_start"] == "2026-12-01T14:00:00+00:00"
    assert document["window_end"] == "2026-12-01T15:00:00+00:00"


def test_at_reads_a_naive_time_in_the_zone_and_nests(tmp_path: Path) -> None:
    document = run_json(
        "slots", "at", "2026-12-01T14:45", "--slots", "48", "--layout", "nested", "--tz", "Europe/Istanbul",
        cwd=tmp_path,
    )
    # Nested: the second half of hour 14 is slot 14 + 24.
    assert (document["period"], document["slot"]) == ("2026-12-01", 38)
    assert document["window_start"] == "2026-12-01T14:30:00+03:00"
    short = run_json("slots", "at", "2026-12-01T10:07:30Z", "--slots", "10", "--period-length", "10m", cwd=tmp_path)
    assert (short["period"], short["slot"]) == ("2026-12-01T10:00", 7)
    people = run_cli("slots", "at", "2026-12-01T14:59:59Z", "--slots", "24", cwd=tmp_path)
    assert people.code == 0 and "window_start" in people.stdout


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["2026-12-01T10:00", "--slots", "0"], ["slots must be a positive integer"]),
        (["2026-12-01T10:00", "--slots", "7"], ["slots=7 does not divide", "86400"]),
        (["2026-12-01T10:00", "--slots", "24", "--tz", "Mars/Olympus"], ["unknown time zone", "Mars/Olympus"]),
        (["2026-03-08T02:30", "--slots", "24", "--tz", "America/New_York"], ["does not exist", "offset"]),
        (["yesterday", "--slots", "24"], ["not an ISO 8601 time"]),
        (["2026-12-01T10:00", "--slots", "24", "--period-length", "soon"], ["--period-length", "not a duration"]),
    ],
)
def test_at_bad_input(tmp_path: Path, args: list[str], fragments: list[str]) -> None:
    assert_one_line_error(run_cli("slots", "at", *args, cwd=tmp_path), *fragments)


def test_which_window_of_an_id(tmp_path: Path) -> None:
    document = run_json("slots", "which", "12345", "--slots", "24", "--at", "2026-12-01T10:00Z", cwd=tmp_path)
    assert set(document) >= WHICH_FIELDS
    assert document["slot"] == 12345 % 24 == 9
    assert document["window_start"] == "2026-12-01T09:00:00+00:00"
    assert document["window_end"] == "2026-12-01T10:00:00+00:00"
    assert document["next_window_start"] == "2026-12-02T09:00:00+00:00"  # today's window has passed
    hashed = run_json(
        "slots", "which", "user-42", "--slots", "24", "--assign", "hash", "--at", "2026-12-01T00:00Z", cwd=tmp_path
    )
    assert 0 <= hashed["slot"] < 24  # type: ignore[operator]
    assert hashed["window_start"] == f"2026-12-01T{hashed['slot']:02d}:00:00+00:00"


def test_which_defaults_to_the_current_period(tmp_path: Path) -> None:
    before = datetime.now(UTC)
    document = run_json("slots", "which", "7", "--slots", "24", cwd=tmp_path)
    after = datetime.now(UTC)
    assert document["slot"] == 7
    start = datetime.fromisoformat(str(document["window_start"]))
    assert before.date() <= start.date() <= after.date() and start.hour == 7
    assert document["period"] == start.date().isoformat()


def test_which_bad_input(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("slots", "which", "user-42", "--slots", "24", cwd=tmp_path), "user-42", "hash")
    assert_one_line_error(
        run_cli("slots", "which", "5", "--slots", "24", "--tz", "Nowhere/Land", cwd=tmp_path), "Nowhere/Land"
    )
    assert_one_line_error(run_cli("slots", "which", "5", "--slots", "-3", cwd=tmp_path), "positive")


# -- migrate --------------------------------------------------------------------------------------


def test_migrate_24_to_48_nested(tmp_path: Path) -> None:
    ids = write_ids(tmp_path / "ids.txt", range(1, 28_743))
    document = run_json(
        "slots", "migrate", "--ids", str(ids), "--from", "24", "--to", "48:nested",
        "--effective-from", "2026-12-02T00:00Z", cwd=tmp_path,
    )
    assert set(document) >= MIGRATE_FIELDS
    assert document["total"] == 28_742
    assert document["effective_from"] == "2026-12-02T00:00:00+00:00"
    assert document["moved_out"] == 0  # a refinement: every record stays in its hour
    assert 0 < document["moved"] < 28_742  # type: ignore[operator]
    assert document["min_gap"] == 86_400.0 and document["max_gap"] == 86_400.0 + 1800.0
    later = run_json(
        "slots", "migrate", "--ids", str(ids), "--from", "24", "--to", "48:nested",
        "--effective-from", "2026-12-02T00:00Z", "--from-offset", "1m", "--to-offset", "5m", cwd=tmp_path,
    )
    assert (later["min_gap"], later["max_gap"]) == (86_400.0 + 240, 86_400.0 + 1800.0 + 240)


def test_migrate_defaults_to_the_next_period_boundary(tmp_path: Path) -> None:
    ids = write_ids(tmp_path / "ids.txt", range(100))
    before = datetime.now(UTC)
    document = run_json("slots", "migrate", "--ids", str(ids), "--from", "24", "--to", "24:hash", cwd=tmp_path)
    effective = datetime.fromisoformat(str(document["effective_from"]))
    assert before < effective <= before + timedelta(days=1, minutes=1)
    assert (effective.hour, effective.minute, effective.second) == (0, 0, 0)
    people = run_cli("slots", "migrate", "--ids", str(ids), "--from", "24", "--to", "24:hash", cwd=tmp_path)
    assert people.code == 0 and "no record runs twice" in people.stdout


def test_migrate_bad_input(tmp_path: Path) -> None:
    ids = write_ids(tmp_path / "ids.txt", range(10))
    base = ["slots", "migrate", "--ids", str(ids)]
    assert_one_line_error(run_cli(*base, "--from", "24:md5", "--to", "48", cwd=tmp_path), "24:md5", "not understood")
    assert_one_line_error(run_cli(*base, "--from", "24", "--to", "hourly", cwd=tmp_path), "hourly")
    assert_one_line_error(
        run_cli(*base, "--from", "24", "--to", "48", "--effective-from", "2026-12-02T05:00Z", cwd=tmp_path),
        "period boundary",
    )
    assert_one_line_error(
        run_cli(*base, "--from", "24", "--to", "48", "--effective-from", "2026-12-02T00:00Z", "--from-offset", "31m",
                cwd=tmp_path),
        "the new run time 31 min is outside the 30 min slot of 48:",  # --to-offset defaults to --from-offset
    )
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("1\n\nabc\n", encoding="utf-8")
    assert_one_line_error(
        run_cli("slots", "migrate", "--ids", str(mixed), "--from", "24", "--to", "24:hash", cwd=tmp_path),
        "line 3", "'abc'",
    )


# -- index ----------------------------------------------------------------------------------------


def _users(url: str, count: int = 2000) -> None:
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql("DROP TABLE IF EXISTS cli_users")
            connection.exec_driver_sql("CREATE TABLE cli_users (id BIGINT PRIMARY KEY, name TEXT NOT NULL)")
            connection.execute(
                sa.text("INSERT INTO cli_users (id, name) VALUES (:id, :name)"),
                [{"id": n, "name": f"user {n}"} for n in range(1, count + 1)],
            )
    finally:
        engine.dispose()


def test_index_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'users.db'}"
    _users(url)
    args = ["slots", "index", "--target-db", url, "--table", "cli_users", "--id", "id", "--slots", "24"]
    document = run_json(*args, cwd=tmp_path)
    assert set(document) >= INDEX_FIELDS
    assert document["column"] == "vardiya_slot_24_mod" and document["created"] is True
    assert document["uses_index"] is True and document["plain_uses_index"] is False
    assert any(str(document["index"]) in line for line in document["plan"])  # type: ignore[union-attr]
    again = run_cli(*args, cwd=tmp_path)
    assert again.code == 0, again.stderr
    assert "already there" in again.stdout and "verified" in again.stdout
    hashed = run_json(*args, "--assign", "hash", cwd=tmp_path)
    assert hashed["column"] == "vardiya_slot_24_hash1" and hashed["uses_index"] is True


@pytest.mark.postgres
def test_index_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    _users(postgres_url)
    args = ["slots", "index", "--target-db", postgres_url, "--table", "cli_users", "--slots", "24"]
    try:
        document = run_json(*args, cwd=tmp_path)
        assert document["created"] is True and document["uses_index"] is True
        assert run_json(*args, cwd=tmp_path)["created"] is False
    finally:
        engine = sa.create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://", 1))
        with engine.begin() as connection:
            connection.exec_driver_sql("DROP TABLE IF EXISTS cli_users")
        engine.dispose()


def test_index_bad_input(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'users.db'}"
    _users(url, count=10)
    base = ["slots", "index", "--target-db", url]
    assert_one_line_error(run_cli(*base, "--table", "people", "--slots", "24", cwd=tmp_path), "people", "cli_users")
    assert_one_line_error(
        run_cli(*base, "--table", "cli_users", "--id", "uid", "--slots", "24", cwd=tmp_path), "uid"
    )
    assert_one_line_error(run_cli(*base, "--table", "cli_users", "--slots", "0", cwd=tmp_path), "positive")
    assert_one_line_error(
        run_cli("slots", "index", "--target-db", f"sqlite:///{tmp_path / 'none.db'}", "--table", "t",
                "--slots", "24", cwd=tmp_path),
        "does not exist",
    )


# -- report ---------------------------------------------------------------------------------------


@pytest.fixture
def replayed(tmp_path: Path) -> list[str]:
    """An app with one slot job, replayed over 2026-12-01; returns the global options to reach it."""
    (tmp_path / "jobs.py").write_text(APP, encoding="utf-8")
    options = ["--app", "jobs.py:app", "--db", f"sqlite:///{tmp_path / 'vardiya.db'}"]
    result = run_cli(
        *options, "replay", "nightly", "--from", "2026-12-01T00:00Z", "--to", "2026-12-02T00:00Z", "--json",
        cwd=tmp_path,
    )
    assert result.code == 1, result.stderr  # two records fail on purpose
    replay = json.loads(result.stdout)
    assert len(replay["ticks"]) == 24 and replay["done"] == 238 and replay["failed"] == 2
    return options


def test_report_after_a_replay(tmp_path: Path, replayed: list[str]) -> None:
    document = run_json(*replayed, "slots", "report", "nightly", "--period", "2026-12-01", cwd=tmp_path)
    assert set(document) >= REPORT_FIELDS
    assert document["period"] == "2026-12-01"
    loads = document["slots"]
    assert isinstance(loads, list) and [load["slot"] for load in loads] == list(range(24))
    for load in loads:
        assert set(load) >= REPORT_SLOT_FIELDS
        assert load["count"] == 10 and load["overrun"] is False
        # A failed record produced nothing: 100 and 200 add no bytes.
        assert load["bytes"] == sum(10 * n for n in range(1, 241) if n % 24 == load["slot"] and n not in (100, 200))
    assert sum(load["failed"] for load in loads) == 2
    assert loads[100 % 24]["failed"] == 1 and loads[200 % 24]["failed"] == 1
    warnings = document["warnings"]
    assert isinstance(warnings, list)
    failed = [warning for warning in warnings if "still failed" in warning]
    assert len(failed) == 1 and "2 records are still failed" in failed[0] and "100, 200" in failed[0]
    # The CLI reads the real clock: once no tick can reach 2026-12-01 any more, the report also says
    # that the two failed records were never done, and how to backfill them.
    closed = datetime.now(UTC) >= datetime(2026, 12, 3, tzinfo=UTC)
    never_done = [warning for warning in warnings if warning not in failed]
    if closed:
        assert len(never_done) == 1 and "never done" in never_done[0] and "slots 4 (1), 8 (1)" in never_done[0]
        assert "vardiya slots backfill nightly --period 2026-12-01" in never_done[0]
    else:
        assert never_done == []
    assert "plot" not in document


def test_report_with_a_chart(tmp_path: Path, replayed: list[str]) -> None:
    chart = tmp_path / "out" / "load.svg"
    document = run_json(
        *replayed, "slots", "report", "nightly", "--period", "2026-12-01", "--plot", str(chart), cwd=tmp_path
    )
    assert document["plot"] == str(chart)
    root = ET.fromstring(chart.read_bytes())
    bars = [rect for rect in root.iter("{http://www.w3.org/2000/svg}rect") if "bar" in (rect.get("class") or "")]
    assert len(bars) == 2 * 24
    people = run_cli(*replayed, "slots", "report", "nightly", "--period", "2026-12-01", "--plot", "p.svg",
                     cwd=tmp_path)
    assert people.code == 0, people.stderr
    assert "chart written to p.svg" in people.stdout and "still failed" in people.stdout
    assert (tmp_path / "p.svg").exists()


def test_report_of_a_period_without_runs_warns(tmp_path: Path, replayed: list[str]) -> None:
    document = run_json(*replayed, "slots", "report", "nightly", "--period", "2026-12-05", cwd=tmp_path)
    assert [load["count"] for load in document["slots"]] == [0] * 24  # type: ignore[union-attr]
    assert "no records" in document["warnings"][0]  # type: ignore[index]


def test_report_bad_input(tmp_path: Path, replayed: list[str]) -> None:
    report = ["slots", "report"]
    assert_one_line_error(run_cli(*replayed, *report, "weekly", "--period", "2026-12-01", cwd=tmp_path),
                          "no slot job 'weekly'", "nightly")
    assert_one_line_error(run_cli(*replayed, *report, "nightly", "--period", "2026-13-01", cwd=tmp_path),
                          "2026-13-01", "2026-12-01")
    assert_one_line_error(
        run_cli(*replayed, *report, "nightly", "--period", "2026-12-01", "--plot", "load.pdf", cwd=tmp_path), ".svg"
    )
    assert_one_line_error(run_cli(*report, "nightly", "--period", "2026-12-01", cwd=tmp_path), "--app")
    missing = tmp_path / "elsewhere.db"
    assert_one_line_error(
        run_cli("--app", "jobs.py:app", "--db", f"sqlite:///{missing}", *report, "nightly", "--period", "2026-12-01",
                cwd=tmp_path),
        "db upgrade",
    )
    assert not missing.exists()  # a report writes nothing, not even an empty store
    assert not (tmp_path / "load.pdf").exists()


def test_report_png_needs_cairosvg(tmp_path: Path, replayed: list[str]) -> None:
    if importlib.util.find_spec("cairosvg") is not None:
        pytest.skip("cairosvg is installed here, so PNG works")
    result = run_cli(*replayed, "slots", "report", "nightly", "--period", "2026-12-01", "--plot", "load.png",
                     cwd=tmp_path)
    assert_one_line_error(result, "cairosvg", ".svg")
    assert not (tmp_path / "load.png").exists()
