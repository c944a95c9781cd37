"""``vardiya pause``, ``resume``, ``trigger`` and what ``status`` says of them, as a user runs them.

An app file, the CLI as a subprocess, a SQLite store: a pause is stored and shown, twice is a no-op, a
paused handler's calls stay queued through ``worker --until-idle`` and run once resumed; a trigger
queues the run a scheduler would fire, once per (name, planned), and a worker runs it; bad names, bad
``--at`` and a trigger of a paused name are one line and exit 2, with nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path

import sqlalchemy as sa

from tests.support.cli import assert_one_line_error, run_cli

APP = '''
from datetime import timedelta
from pathlib import Path

from vardiya import App, IterableSource, SlotScheme
from vardiya.pipeline import Daily, Pipeline
from vardiya.schedule import Cron

app = App("shop")
here = Path(__file__).parent

@app.slot_job("nightly_users", scheme=SlotScheme(slots=24), source=IterableSource(range(48)))
def refresh(user_id):
    with open(here / "users.txt", "a") as out:
        out.write(f"{user_id}\\n")

@app.handler("emails")
def send(record, context):
    with open(here / "emails.txt", "a") as out:
        out.write(f"{record['to']}\\n")

@app.handler("clash")
def clash_handler(record, context):
    pass

@app.every(timedelta(minutes=5), name="clash")
def clash_periodic():
    pass

@app.every(timedelta(minutes=5))
def rates(planned_at):
    with open(here / "rates.txt", "a") as out:
        out.write(planned_at.isoformat() + "\\n")

meters = Pipeline("meters")

@meters.stage(partitions=Daily(start="2026-12-01", end="2026-12-31"))
def load(context):
    (here / f"load-{context.partition}.txt").write_text("done")
    return []

app.add_pipeline(meters, root="out", triggers=[Cron(expr="0 3 * * *", name="nightly")])
'''


def _setup(tmp_path: Path) -> tuple[str, ...]:
    (tmp_path / "jobs.py").write_text(APP)
    return ("--app", "jobs.py:app", "--db", f"sqlite:///{tmp_path / 'vardiya.db'}")


def _json(result: object) -> dict:  # type: ignore[type-arg]
    assert result.code == 0, (result.stdout, result.stderr)  # type: ignore[attr-defined]
    document: dict = json.loads(result.stdout)  # type: ignore[attr-defined,type-arg]
    return document


def _rows(tmp_path: Path, table: str) -> list[tuple[object, ...]]:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'vardiya.db'}")
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.exec_driver_sql(f"SELECT * FROM {table}")]
    finally:
        engine.dispose()


def test_pause_is_stored_shown_by_status_and_resumed_once(tmp_path: Path) -> None:
    app = _setup(tmp_path)
    first = run_cli("pause", "nightly_users", *app, "--reason", "source migration", cwd=tmp_path)
    assert first.code == 0, first.stderr
    assert "paused slot job nightly_users (source migration)" in first.stdout
    again = _json(run_cli("pause", "nightly_users", *app, "--json", cwd=tmp_path))
    assert again["changed"] is False and again["pause"]["reason"] == "source migration"
    text = run_cli("pause", "nightly_users", *app, cwd=tmp_path)
    assert "already paused" in text.stdout and "nothing changed" in text.stdout

    status = json.loads(run_cli("status", *app, "--json", cwd=tmp_path).stdout)
    assert [(p["kind"], p["name"], p["reason"]) for p in status["paused"]] == [
        ("slot_job", "nightly_users", "source migration")
    ]
    job = next(job for job in status["jobs"] if job["job"] == "nightly_users")
    assert job["paused"] is True
    assert "nightly_users" not in status["behind"]  # paused on purpose: not behind
    shown = run_cli("status", *app, cwd=tmp_path, env={"COLUMNS": "200"})
    assert "paused" in shown.stdout and "source migration" in shown.stdout

    resumed = _json(run_cli("resume", "nightly_users", *app, "--json", cwd=tmp_path))
    assert (resumed["changed"], resumed["paused"]) == (True, False)
    noop = run_cli("resume", "nightly_users", *app, cwd=tmp_path)
    assert noop.code == 0 and "is not paused; nothing changed" in noop.stdout
    assert json.loads(run_cli("status", *app, "--json", cwd=tmp_path).stdout)["paused"] == []


def test_unknown_ambiguous_and_bad_names_exit_2_and_write_nothing(tmp_path: Path) -> None:
    app = _setup(tmp_path)
    unknown = run_cli("pause", "nightly", *app, cwd=tmp_path)
    assert_one_line_error(unknown, "nothing named 'nightly'", "nightly_users (slot job)", "meters:nightly (trigger)")
    ambiguous = run_cli("pause", "clash", *app, cwd=tmp_path)
    assert_one_line_error(ambiguous, "'clash' names more than one thing", "handler", "periodic", "--kind")
    assert not (tmp_path / "vardiya.db").exists()
    picked = _json(run_cli("pause", "clash", "--kind", "periodic", *app, "--json", cwd=tmp_path))
    assert (picked["kind"], picked["name"]) == ("periodic", "clash")
    assert _rows(tmp_path, "paused") and len(_rows(tmp_path, "paused")) == 1
    no_app = run_cli("pause", "emails", "--db", f"sqlite:///{tmp_path / 'vardiya.db'}", cwd=tmp_path)
    assert_one_line_error(no_app, "--app")
    long_reason = run_cli("pause", "emails", *app, "--reason", "x" * 501, cwd=tmp_path)
    assert_one_line_error(long_reason, "at most 500 characters")
    assert len(_rows(tmp_path, "paused")) == 1  # neither wrote anything


def test_a_paused_handlers_calls_stay_queued_and_run_after_resume(tmp_path: Path) -> None:
    app = _setup(tmp_path)
    assert run_cli("invoke", "submit", "emails", *app, "--payload", '{"to": "a@example.com"}', cwd=tmp_path).code == 0
    assert run_cli("pause", "emails", *app, cwd=tmp_path).code == 0
    held = _json(run_cli("worker", *app, "--only", "emails", "--until-idle", "--json", cwd=tmp_path))
    assert held["items"] == 0
    assert not (tmp_path / "emails.txt").exists()
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'vardiya.db'}")
    with engine.connect() as connection:
        pending = connection.exec_driver_sql("SELECT state, attempts FROM work_items WHERE kind = 'call:emails'").all()
    engine.dispose()
    assert [tuple(row) for row in pending] == [("pending", 0)]  # not claimed, not failed, no attempt charged
    assert run_cli("resume", "emails", *app, cwd=tmp_path).code == 0
    ran = _json(run_cli("worker", *app, "--only", "emails", "--until-idle", "--json", cwd=tmp_path))
    assert ran["succeeded"] == 1
    assert (tmp_path / "emails.txt").read_text() == "a@example.com\n"
    assert _rows(tmp_path, "services") == []  # the workers stopped cleanly: their heartbeat rows are gone


def test_trigger_queues_a_periodic_run_once_and_a_worker_runs_it(tmp_path: Path) -> None:
    app = _setup(tmp_path)
    at = "2026-12-02T10:00:00+00:00"
    first = _json(run_cli("trigger", "rates", "--at", at, *app, "--json", cwd=tmp_path))
    assert first["queued"] is True and first["item_kind"] == "periodic:rates"
    assert first["key"] == "manual@2026-12-02T10:00:00.000000Z"
    second = run_cli("trigger", "rates", "--at", "2026-12-02T13:00:00+03:00", *app, cwd=tmp_path)
    assert second.code == 0 and "already queued" in second.stdout and "not queued again" in second.stdout
    ran = _json(run_cli("worker", *app, "--only", "rates", "--until-idle", "--json", cwd=tmp_path))
    assert ran["periodic_runs"] == 1
    assert (tmp_path / "rates.txt").read_text() == "2026-12-02T10:00:00+00:00\n"
    third = _json(run_cli("trigger", "rates", "--at", at, *app, "--json", cwd=tmp_path))
    assert third["queued"] is False and third["state"] == "succeeded"  # the same run is not run twice


def test_trigger_a_slot_tick_and_a_pipeline_partition(tmp_path: Path) -> None:
    app = _setup(tmp_path)
    tick = _json(run_cli("trigger", "nightly_users", "--at", "2026-12-02T05:30:00Z", *app, "--json", cwd=tmp_path))
    assert tick["item_kind"] == "tick:nightly_users" and tick["queued"] is True
    assert tick["payload"]["planned_at"].startswith("2026-12-02T05:")  # the tick of the slot holding 05:30
    pipeline = _json(run_cli("trigger", "meters:nightly", "--at", "2026-12-05", *app, "--json", cwd=tmp_path))
    assert pipeline["payload"]["partition"] == "2026-12-05" and pipeline["key"] == "manual:nightly:2026-12-05"
    by_time = _json(run_cli("trigger", "meters:nightly", "--at", "2026-12-05T12:00:00Z", *app, "--json", cwd=tmp_path))
    assert by_time["queued"] is False and by_time["item"] == pipeline["item"]
    current = _json(run_cli("trigger", "nightly_users", *app, "--json", cwd=tmp_path))  # default: the current slot
    assert current["queued"] is True and current["key"] != tick["key"]
    ran = _json(run_cli("worker", *app, "--until-idle", "--json", cwd=tmp_path))
    assert (ran["ticks"], ran["pipeline_runs"]) == (2, 1)
    assert (tmp_path / "load-2026-12-05.txt").read_text() == "done"
    assert (tmp_path / "users.txt").read_text().count("\n") >= 2  # the current slot's tick ran its records


def test_bad_triggers_exit_2_and_queue_nothing(tmp_path: Path) -> None:
    app = _setup(tmp_path)
    assert run_cli("pause", "meters", *app, cwd=tmp_path).code == 0
    cases = [
        (["trigger", "rates", "--at", "yesterday"], "not an ISO 8601 time"),
        (["trigger", "rates", "--at", "10000-01-01T00:00:00Z"], "not an ISO 8601 time"),
        (["trigger", "meters:nightly", "--at", "2027-01-05"], "no partition of trigger meters:nightly"),
        (["trigger", "meters:nightly", "--at", "soon"], "neither a partition"),
        (["trigger", "emails"], "runs on submit"),
        (["trigger", "meters:nightly", "--at", "2026-12-05"], "pipeline meters is paused"),
        (["trigger", "missing"], "nothing named 'missing'"),
    ]
    for args, fragment in cases:
        assert_one_line_error(run_cli(*args, *app, cwd=tmp_path), fragment)
    assert_one_line_error(run_cli("trigger", "meters:nightly", *app, cwd=tmp_path), "resume it first: vardiya resume meters")
    assert _rows(tmp_path, "work_items") == []


def test_a_scheduler_fires_nothing_for_a_paused_job_and_says_so_once(tmp_path: Path) -> None:
    app = _setup(tmp_path)
    assert run_cli("pause", "nightly_users", *app, "--reason", "migration", cwd=tmp_path).code == 0
    held = run_cli("scheduler", *app, "--only", "nightly_users", "--steps", "3", "--poll-max", "0.05", "--json", cwd=tmp_path)
    assert _json(held)["fired"] == 0
    assert held.stderr.count("tick:nightly_users: paused (slot_job nightly_users") == 1
    assert _rows(tmp_path, "work_items") == [] and _rows(tmp_path, "services") == []
    assert run_cli("resume", "nightly_users", *app, cwd=tmp_path).code == 0
    fired = _json(run_cli("scheduler", *app, "--only", "nightly_users", "--steps", "1", "--json", cwd=tmp_path))
    assert fired["fired"] == 1  # resumed: the current slot's tick fires
