"""One spelling per thing, old spellings kept for a release, an app module found from the working directory.

Run as real processes: the installed ``vardiya`` script for the app import (``python -m`` already puts
the working directory on sys.path, the script does not), ``python -m vardiya`` for the rest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.cli import assert_one_line_error, run_cli

PIPE = str(Path(__file__).resolve().parents[2] / "examples" / "meter_pipeline.py") + ":pipeline"
SCRIPT = Path(sys.executable).parent / "vardiya"
HANDLERS = '''
from vardiya import App

app = App("here")

@app.handler("echo", model="sync")
def echo(record, context):
    return {"echo": record, "flag": True, "nothing": None}
'''


def test_an_app_module_in_the_working_directory_imports_from_the_installed_script(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(HANDLERS, encoding="utf-8")
    environment = {key: value for key, value in os.environ.items() if not key.startswith("VARDIYA_")}
    environment.pop("PYTHONPATH", None)
    environment["VARDIYA_APP"] = "jobs:app"
    done = subprocess.run(
        [str(SCRIPT), "invoke", "call", "echo", "--payload", '{"id": 1}', "--json"],
        cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == {"echo": {"id": 1}, "flag": True, "nothing": None}


def test_invoke_call_prints_text_or_one_json_document(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(HANDLERS, encoding="utf-8")
    text = run_cli("--app", "jobs.py:app", "invoke", "call", "echo", "--payload", '{"id": 1}', cwd=tmp_path)
    assert text.code == 0, text.stderr
    assert text.stdout.startswith("echo returned: ")
    assert "None" not in text.stdout and "True" not in text.stdout
    document = run_cli("--app", "jobs.py:app", "invoke", "call", "echo", "--payload", '{"id": 1}', "--json", cwd=tmp_path)
    assert json.loads(document.stdout) == {"handler": "echo", "result": {"echo": {"id": 1}, "flag": True, "nothing": None}}


def test_backfill_takes_concurrency_and_the_old_max_concurrent_with_one_warning(tmp_path: Path) -> None:
    new = run_cli("pipeline", "backfill", PIPE, "--from", "2026-01", "--to", "2026-02", "--concurrency", "2", "--json",
                  cwd=tmp_path)
    assert new.code == 0, new.stderr
    assert new.stderr == ""
    assert len(json.loads(new.stdout)["succeeded"]) == 8
    old = run_cli("pipeline", "backfill", PIPE, "--from", "2026-03", "--to", "2026-03", "--max-concurrent", "2",
                  "--json", cwd=tmp_path)
    assert old.code == 0, old.stderr
    assert old.stderr.strip().splitlines() == [
        "vardiya: warning: --max-concurrent is deprecated and goes in the next release; use --concurrency"
    ]
    assert len(json.loads(old.stdout)["succeeded"]) == 4
    help_text = run_cli("pipeline", "backfill", "--help", cwd=tmp_path).stdout
    assert "--concurrency" in help_text and "--max-concurrent" not in help_text


def test_period_names_a_period_and_period_length_a_length(tmp_path: Path) -> None:
    new = run_cli("slots", "at", "2026-12-01T10:07:30Z", "--slots", "10", "--period-length", "10m", "--json", cwd=tmp_path)
    assert new.code == 0 and new.stderr == "", new.stderr
    old = run_cli("slots", "at", "2026-12-01T10:07:30Z", "--slots", "10", "--period", "10m", "--json", cwd=tmp_path)
    assert json.loads(old.stdout) == json.loads(new.stdout)
    assert "use --period-length" in old.stderr and len(old.stderr.strip().splitlines()) == 1
    help_text = run_cli("slots", "which", "--help", cwd=tmp_path).stdout
    assert "--period-length" in help_text and "--period " not in help_text


def test_worker_and_scheduler_choose_with_only(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(HANDLERS, encoding="utf-8")
    unknown = run_cli("--app", "jobs.py:app", "worker", "--until-idle", "--only", "nope", cwd=tmp_path)
    assert_one_line_error(unknown, "--only 'nope'", "echo")
    assert not (tmp_path / "vardiya.db").exists()
    old = run_cli("--app", "jobs.py:app", "worker", "--until-idle", "--handler", "echo", "--json", cwd=tmp_path)
    assert old.code == 0, old.stderr
    assert "use --only" in old.stderr
    assert "--only" in run_cli("scheduler", "--help", cwd=tmp_path).stdout


def test_the_worker_logs_what_it_starts_with(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(HANDLERS, encoding="utf-8")
    done = run_cli("--app", "jobs.py:app", "worker", "--until-idle", "--log-format", "json", "--json", cwd=tmp_path)
    assert done.code == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    start = next(line for line in lines if "starting" in line["message"])
    assert start["service"] == "worker" and start["app"] == "here" and start["runs"] == ["echo"]
    assert start["store"].endswith("vardiya.db")


def test_strict_names_each_undeclared_read_once(tmp_path: Path) -> None:
    pipe = PIPE.replace(":pipeline", ":pipeline_missing_edge")
    run = run_cli("pipeline", "run", pipe, "--strict", cwd=tmp_path, env={"COLUMNS": "200"})
    assert run.code == 1, run.stderr
    for month in range(2, 13):
        read = f"consumption@2026-{month:02d} read clean@2026-{month - 1:02d}"
        assert run.stdout.count(read) == 1, (read, run.stdout)
