"""The CLI read at any width, piped: no cell cut short, ids and names whole, never an ellipsis.

Every command runs as a real process with stdout piped (as ``| cat`` does) and COLUMNS at 60, 80 and
200. Tables that do not fit print ``key: value`` lines; the test only asks what a reader needs: every
id, name and header word appears whole in the output, and no ``…`` appears anywhere.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.cli import Result, run_cli

WIDTHS = (60, 80, 200)
HANDLER = "validate_meter_readings_of_the_northern_region"
JOB = "refresh_subscriber_summaries_nightly"
APP = f'''
from vardiya import App, FixedWait, IterableSource, RetryPolicy, SlotScheme

app = App("width")

@app.handler({HANDLER!r}, model="async", retry=RetryPolicy(max_attempts=1, wait=FixedWait(seconds=1)))
def validate(reading, context):
    raise ValueError("reading " + str(reading["id"]) + " is poison: the meter index went backwards " * 2)

@app.slot_job({JOB!r}, scheme=SlotScheme(slots=24, tz="Europe/Istanbul"), source=IterableSource(range(100)))
def refresh(record, context):
    return None
'''


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with three dead letters of a long-named handler, and the worker's report of them."""
    directory = tmp_path_factory.mktemp("width")
    (directory / "widthapp.py").write_text(APP, encoding="utf-8")
    (directory / "r.jsonl").write_text("".join(json.dumps({"id": n}) + "\n" for n in (101, 202, 303)))
    submitted = run_cli("--app", "widthapp.py:app", "invoke", "submit", HANDLER, "--payloads", "r.jsonl", cwd=directory)
    assert submitted.code == 0, submitted.stderr
    return directory


def piped(directory: Path, width: int, *args: str) -> Result:
    return run_cli(*args, cwd=directory, env={"COLUMNS": str(width)})


def assert_whole(result: Result, *words: str) -> None:
    assert "…" not in result.stdout, result.stdout
    for word in words:
        assert re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", result.stdout), (word, result.stdout)


@pytest.mark.parametrize("width", WIDTHS)
def test_worker_report_and_dead_letters_read_whole(workspace: Path, width: int) -> None:
    app = ("--app", "widthapp.py:app")
    worker = piped(workspace, width, *app, "worker", "--until-idle", "--only", HANDLER)
    assert worker.code == 0, worker.stderr
    assert_whole(worker, "items", "succeeded", "retried", "dead", "released", "batches", "pipeline", "runs")
    owner = re.search(r"worker-[0-9a-f]{12}", worker.stdout)
    assert owner is not None, worker.stdout
    listed = piped(workspace, width, "dlq", "list")
    assert listed.code == 0, listed.stderr
    assert_whole(listed, "1", "2", "3", HANDLER, "async", "records", "tries", "poison:")  # ids 1-3 in a fresh store
    if width == WIDTHS[0]:
        shown = piped(workspace, width, "dlq", "show", "1")
        assert_whole(shown, HANDLER, "attempt", "outcome")
        assert "None" not in shown.stdout and "True" not in shown.stdout


@pytest.mark.parametrize("width", WIDTHS)
def test_status_keeps_job_names_whole(workspace: Path, width: int) -> None:
    status = piped(workspace, width, "--app", "widthapp.py:app", "status")
    assert_whole(status, JOB, "family", "succeeded")
    assert "None" not in status.stdout


@pytest.mark.parametrize("width", WIDTHS[:2])
def test_pipeline_run_names_every_task_whole(tmp_path: Path, width: int) -> None:
    pipe = str(Path(__file__).resolve().parents[2] / "examples" / "meter_pipeline.py") + ":pipeline"
    run = piped(tmp_path, width, "pipeline", "run", pipe, "--inject-failure", "clean@2026-06")
    assert run.code == 1, run.stderr
    assert_whole(run, "clean@2026-06", "consumption@2026-07", "summary@2026-06", "succeeded", "blocked")


@pytest.mark.parametrize("width", WIDTHS[:2])
def test_help_shows_every_command_sentence_whole(tmp_path: Path, width: int) -> None:
    for group in ((), ("pipeline",)):
        result = piped(tmp_path, width, *group, "--help")
        assert result.code == 0, result.stderr
        assert "…" not in result.stdout and "..." not in result.stdout.replace("[ARGS]...", ""), result.stdout
        flat = " ".join(result.stdout.split())
        if group == ("pipeline",):
            assert "Per task: its runs, when, and what started each (a trigger, or by hand); empty runs are named." in flat


@pytest.mark.parametrize("group", [(), ("dlq",), ("pipeline",)])
def test_a_bare_group_prints_its_help_and_exits_0(tmp_path: Path, group: tuple[str, ...]) -> None:
    result = run_cli(*group, cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert result.stdout.startswith("Usage: vardiya"), result.stdout
    assert "Commands:" in result.stdout and result.stderr == ""
    assert list(tmp_path.iterdir()) == []  # nothing written: no store made


def test_plan_tables_fit_or_fold_to_lines(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "meter_validation"
    for width in WIDTHS[:2]:
        result = piped(
            tmp_path, width, "plan", "batch-sweep", "--workload", str(example / "validation-night.csv"),
            "--profile", str(example / "profile.toml"), "--sizes", "5,10,2500",
        )
        assert result.code == 0, result.stderr
        assert_whole(result, "co-failed", "processed", "cheapest", "fastest", "2,500")
        for line in result.stdout.splitlines():
            assert len(line) <= width, (width, line)
