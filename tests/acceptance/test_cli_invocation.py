"""The invocation commands as a user runs them: worker, invoke, dlq; and every bad input is one line, exit 2."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.support.cli import assert_one_line_error, run_cli

FAST_APP = '''
from vardiya.app import App
from vardiya.invoke import FixedWait, RetryPolicy

app = App("fast")
RETRY = RetryPolicy(max_attempts=3, wait=FixedWait(seconds=0.01))

def validate(record, context):
    if record["id"] % 10 == 0:
        raise ValueError(f"reading {record['id']} is poison")
    if record["id"] % 7 == 0 and context.attempt == 1:
        raise TimeoutError("try again")
    return {"id": record["id"], "valid": True}

app.handler("validate", model="async", retry=RETRY)(validate)
app.handler("validate_stream", model="stream", batch_size=10, retry=RETRY)(validate)
app.handler("validate_sync", model="sync")(validate)
'''

BAD_APPS = {
    "impossible batch": (
        "app.handler('v', model='stream', batch_size=2500, per_record_s=0.4, per_call_overhead_s=0.25)(f)",
        "batch_size 2500 needs up to 1000.25 s per invocation",
    ),
    "negative wait": (
        "app.handler('v', retry=RetryPolicy(max_attempts=3, wait=FixedWait(seconds=-5)))(f)",
        "a wait cannot be negative: seconds=-5",
    ),
    "zero attempts": (
        "app.handler('v', retry=RetryPolicy(max_attempts=0, wait=FixedWait(seconds=5)))(f)",
        "max_attempts must be a whole number of at least 1",
    ),
}


def _app(directory: Path, text: str, name: str = "app_module.py") -> str:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return f"{path}:app"


@pytest.fixture
def fast(tmp_path: Path) -> tuple[Path, list[str]]:
    app = _app(tmp_path, FAST_APP)
    return tmp_path, ["--db", f"sqlite:///{tmp_path / 'v.db'}", "--app", app]


def test_submit_work_status_metrics_and_the_dead_letters(fast: tuple[Path, list[str]]) -> None:
    cwd, options = fast
    lines = "\n".join(json.dumps({"id": i}) for i in range(1, 41))
    (cwd / "readings.jsonl").write_text(lines + "\n")

    submitted = run_cli("invoke", "submit", "validate", "--payloads", "readings.jsonl", "--json", *options, cwd=cwd)
    assert submitted.code == 0, submitted.stderr
    handles = json.loads(submitted.stdout)["handles"]
    assert len(handles) == 40
    worked = run_cli("worker", "--until-idle", "--json", *options, cwd=cwd)
    assert worked.code == 0, worked.stderr
    report = json.loads(worked.stdout)
    assert (report["succeeded"], report["dead"]) == (36, 4)
    assert "dead letter: validate" in worked.stderr  # the error is visible, not swallowed

    status = json.loads(run_cli("invoke", "status", str(handles[9]), "--json", *options, cwd=cwd).stdout)
    assert status["state"] == "dead" and status["attempts"] == 3 and "is poison" in status["error"]
    assert [entry["outcome"] for entry in status["history"]] == ["failed"] * 3
    metrics = json.loads(run_cli("invoke", "metrics", "validate", "--json", *options, cwd=cwd).stdout)
    assert (metrics["calls"], metrics["dead_letter"], metrics["extra"]) == (40 + 5 + 8, 4, 13)

    listed = json.loads(run_cli("dlq", "list", "--handler", "validate", "--json", *options, cwd=cwd).stdout)
    assert listed["total"] == 4
    shown = json.loads(run_cli("dlq", "show", str(listed["dead_letters"][0]["id"]), "--json", *options, cwd=cwd).stdout)
    assert shown["records"] == [{"record": {"id": 10}, "processed": 3}] and len(shown["history"]) == 3
    dry = json.loads(run_cli("dlq", "redrive", "--error", "poison", "--dry-run", "--json", *options, cwd=cwd).stdout)
    assert dry["dry_run"] and dry["items"] == 4
    assert json.loads(run_cli("dlq", "list", "--json", *options, cwd=cwd).stdout)["total"] == 4
    redriven = json.loads(run_cli("dlq", "redrive", "--handler", "validate", "--rate", "100/s", "--json", *options, cwd=cwd).stdout)
    assert redriven["items"] == 4 and redriven["rate_per_s"] == 100
    assert run_cli("worker", "--until-idle", *options, cwd=cwd).code == 0
    purged = json.loads(run_cli("dlq", "purge", "--handler", "validate", "--json", *options, cwd=cwd).stdout)
    assert purged["items"] == 4
    assert json.loads(run_cli("dlq", "list", "--json", *options, cwd=cwd).stdout)["total"] == 0


def test_stream_append_and_a_sync_call(fast: tuple[Path, list[str]]) -> None:
    cwd, options = fast
    payloads = "\n".join(json.dumps({"id": i}) for i in range(1, 31))
    (cwd / "r.jsonl").write_text(payloads)
    appended = run_cli("invoke", "append", "validate_stream", "--payloads", "r.jsonl", "--json", *options, cwd=cwd)
    assert len(json.loads(appended.stdout)["offsets"]) == 30
    assert run_cli("worker", "--until-idle", *options, cwd=cwd).code == 0
    metrics = json.loads(run_cli("invoke", "metrics", "validate_stream", "--json", *options, cwd=cwd).stdout)
    # retry_batch: 3 batches of 10, each holding a poison record: 3 calls each, 30 dead, 27 co-failed
    assert (metrics["calls"], metrics["dead_letter"], metrics["co_failed"]) == (9, 30, 27)

    ok = run_cli("invoke", "call", "validate_sync", "--payload", '{"id": 7}', "--json", *options, cwd=cwd)
    assert ok.code == 0 and json.loads(ok.stdout)["result"] == {"id": 7, "valid": True}
    failed = run_cli("invoke", "call", "validate_sync", "--payload", '{"id": 10}', *options, cwd=cwd)
    assert failed.code == 1 and "ValueError: reading 10 is poison" in failed.stderr


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["invoke", "submit", "nosuch", "--payload", "{}"], ["unknown handler 'nosuch'", "validate"]),
        (["invoke", "submit", "validate", "--payload", "{bad"], ["--payload is not valid JSON"]),
        (["invoke", "submit", "validate"], ["exactly one of --payload JSON or --payloads FILE"]),
        (["invoke", "append", "validat", "--payload", "1"], ["did you mean 'validate'"]),
        (["worker", "--only", "nosuch"], ["--only 'nosuch' is not a handler", "validate"]),
        (["worker", "--concurrency", "0"], ["concurrency must be a whole number of at least 1"]),
        (["dlq", "redrive", "--max-attempts", "0"], ["--max-attempts must be a whole number of at least 1"]),
        (["dlq", "redrive", "--rate", "fast"], ["--rate 'fast' is not a rate"]),
        (["dlq", "list", "--older-than", "soon"], ["--older-than 'soon' is not a duration"]),
        (["dlq", "purge"], ["name what to purge"]),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    fast: tuple[Path, list[str]], args: list[str], fragments: list[str]
) -> None:
    cwd, options = fast
    result = run_cli(*args, *options, cwd=cwd)
    assert_one_line_error(result, *fragments)
    if args[0] in ("invoke", "dlq"):
        assert not (cwd / "v.db").exists() or args[0] == "dlq"


@pytest.mark.parametrize("case", sorted(BAD_APPS))
def test_an_app_with_an_impossible_handler_is_refused_before_anything_runs(tmp_path: Path, case: str) -> None:
    line, fragment = BAD_APPS[case]
    app = _app(tmp_path, f'''
        from vardiya.app import App
        from vardiya.invoke import FixedWait, RetryPolicy
        app = App("bad")
        def f(record, context):
            return None
        {line}
    ''')
    result = run_cli("worker", "--until-idle", "--db", f"sqlite:///{tmp_path / 'v.db'}", "--app", app, cwd=tmp_path)
    assert_one_line_error(result, fragment)
    assert not (tmp_path / "v.db").exists()
