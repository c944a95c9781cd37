"""`vardiya worker --queue`: a worker claims only its named queues; a bad queue name is exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import assert_one_line_error, run_cli

APP = '''
from vardiya import App

app = App("queued")

@app.handler("report", model="async", queue="reports")
def report(record, context):
    return record["n"]

@app.handler("email", model="async")
def email(record, context):
    return record["n"]
'''


def _setup(tmp_path: Path) -> tuple[str, ...]:
    (tmp_path / "jobs.py").write_text(APP)
    return ("--app", "jobs.py:app", "--db", f"sqlite:///{tmp_path / 'vardiya.db'}")


def _worker(tmp_path: Path, app: tuple[str, ...], *queues: str) -> dict:  # type: ignore[type-arg]
    flags = [part for queue in queues for part in ("--queue", queue)]
    result = run_cli("worker", *app, *flags, "--until-idle", "--json", cwd=tmp_path)
    assert result.code == 0, result.stderr
    document: dict = json.loads(result.stdout)  # type: ignore[type-arg]
    return document


def test_a_worker_claims_only_its_queues(tmp_path: Path) -> None:
    app = _setup(tmp_path)
    for handler in ("report", "email"):
        submitted = run_cli("invoke", "submit", handler, *app, "--payload", '{"n": 1}', cwd=tmp_path)
        assert submitted.code == 0, submitted.stderr
    assert _worker(tmp_path, app, "reports")["succeeded"] == 1  # the report only
    assert _worker(tmp_path, app, "reports")["succeeded"] == 0  # nothing of its queue is left
    assert _worker(tmp_path, app, "default")["succeeded"] == 1  # the email, in the default queue


def test_a_bad_queue_name_is_exit_2_and_runs_nothing(tmp_path: Path) -> None:
    app = _setup(tmp_path)
    submitted = run_cli("invoke", "submit", "report", *app, "--payload", '{"n": 1}', cwd=tmp_path)
    assert submitted.code == 0, submitted.stderr
    assert_one_line_error(run_cli("worker", *app, "--queue", "", "--until-idle", cwd=tmp_path), "queue name")
    assert _worker(tmp_path, app)["succeeded"] == 1  # still queued: the bad worker ran nothing
