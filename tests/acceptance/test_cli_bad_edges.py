"""Bad input at the edges of the CLI, as a user types it: one line, exit 2, the store and the directory unchanged.

Every case runs the real command on SQLite and on PostgreSQL against a migrated store, and compares the
store's whole content and the working directory's files before and after.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.support.cli import assert_one_line_error, run_cli
from tests.support.snapshot import store_content

APP = '''
from vardiya import App, Dedup, IterableSource, SlotScheme

app = App("edges")

@app.slot_job("nightly", scheme=SlotScheme(slots=24, tz="Europe/Istanbul"), source=IterableSource(range(1, 49)))
def refresh(user_id, context):
    pass

def echo(record, context):
    return record

app.handler("plain", model="async")(echo)
app.handler("keyed", model="async", dedup=Dedup(key=lambda r: str(r["id"])))(echo)
app.handler("now", model="sync")(echo)
app.handler("flow", model="stream")(echo)
'''

RANGE = "1970-01-01T00:00Z to 9000-01-01T00:00Z (exclusive)"

#: Inputs refused before any store is named: run once, the directory must not change.
WITHOUT_STORE = {
    "plan: a workload that is not UTF-8": (
        ["plan", "compare", "--workload", "binary.csv", "--profile", "profile.toml"],
        ["binary.csv, line 3: byte 0xff is not UTF-8 text"],
    ),
    "plan: a 20 MB record id": (
        ["plan", "invocation", "--model", "async", "--workload", "huge_field.csv", "--profile", "profile.toml"],
        ["huge_field.csv, line 2: not a workload CSV line", "field larger than field limit"],
    ),
    "slots at the end of the calendar": (
        ["slots", "at", "9999-12-31T23:30", "--slots", "24", "--tz", "Pacific/Kiritimati"], ["TIME 9999-12-31T23:30:00+14:00", RANGE],
    ),
    "slots which at the end of the calendar": (
        ["slots", "which", "5", "--slots", "24", "--at", "9999-12-31T23:30Z"], ["--at 9999-12-31T23:30:00+00:00 is outside"],
    ),
}

#: Inputs of commands that write to the store: run on both backends, the store must not change.
CASES = {
    "a dedup key function that fails on line 3": (
        ["invoke", "submit", "keyed", "--payloads", "payloads.jsonl"],
        ["line 3 of payloads.jsonl: handler 'keyed': the dedup key function <lambda> (app_module.py, line 14) raised TypeError"],
    ),
    "a NUL in a payload": (["invoke", "submit", "plain", "--payload", '{"a": "x\\u0000y"}'], ["--payload: handler 'plain'", "NUL character"]),
    "submit to a sync handler": (
        ["invoke", "submit", "now", "--payload", "{}"], ["handler 'now' is a sync handler", "use vardiya invoke call"],
    ),
    "append to an async handler": (
        ["invoke", "append", "plain", "--payload", "{}"], ["handler 'plain' is a async handler", "use vardiya invoke submit"],
    ),
    "append to a sync handler": (["invoke", "append", "now", "--payload", "{}"], ["is a sync handler", "use vardiya invoke call"]),
    "--key for many payloads": (
        ["invoke", "submit", "plain", "--payloads", "payloads.jsonl", "--key", "order-42"], ["--key names one call", "3 records"],
    ),
    "--key on a sync call without Dedup": (
        ["invoke", "call", "now", "--payload", "{}", "--key", "k"], ["handler 'now' has no Dedup", "call without a key"],
    ),
    "a 501-character --key": (["invoke", "submit", "plain", "--payload", "{}", "--key", "k" * 501], ["must be 1 to 500 characters"]),
    "tick in year 1": (["tick", "nightly", "--at", "0001-01-01T00:00Z"], ["--at 0001-01-01T00:00:00+00:00 is outside", RANGE]),
    "tick in year 9999": (["tick", "nightly", "--at", "9999-12-31T23:59Z"], ["--at 9999-12-31T23:59:00+00:00 is outside"]),
    "replay from year 1": (
        ["replay", "nightly", "--from", "0001-01-01T00:00+01:00", "--to", "2026-01-01T00:00Z"], ["--from 0001-01-01T00:00:00+01:00"],
    ),
    "replay to year 9999": (
        ["replay", "nightly", "--from", "2026-01-01T00:00Z", "--to", "9999-12-31T23:59Z"], ["--to 9999-12-31T23:59:00+00:00"],
    ),
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "app_module.py").write_text(textwrap.dedent(APP))
    profile = Path(__file__).resolve().parents[2] / "examples" / "meter_validation" / "profile.toml"
    (tmp_path / "profile.toml").write_text(profile.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "binary.csv").write_bytes(b"record,outcome\n1,ok\n\xff\xfe,ok\n")
    (tmp_path / "payloads.jsonl").write_text('{"id": 1}\n\n[1, 2]\n{"id": 3}\n', encoding="utf-8")
    return tmp_path


def _files(directory: Path) -> dict[str, int]:
    return {str(path.relative_to(directory)): path.stat().st_size for path in directory.rglob("*") if path.is_file()}


@pytest.mark.parametrize("case", sorted(WITHOUT_STORE))
def test_bad_input_without_a_store_is_one_line_exit_2(project: Path, case: str) -> None:
    (project / "huge_field.csv").write_text("record,outcome\n" + "x" * 20_000_000 + ",ok\n", encoding="utf-8")
    args, fragments = WITHOUT_STORE[case]
    files = _files(project)
    result = run_cli(*args, cwd=project)
    assert_one_line_error(result, *fragments)
    assert _files(project) == files


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(project: Path, store_url: str, case: str) -> None:
    args, fragments = CASES[case]
    before, files = store_content(store_url), _files(project)
    result = run_cli(*args, "--db", store_url, "--app", "app_module.py:app", cwd=project)
    assert_one_line_error(result, *fragments)
    assert "Traceback" not in result.stderr
    assert store_content(store_url) == before
    assert _files(project) == files


def test_bad_input_creates_no_sqlite_store(project: Path) -> None:
    options = ["--db", f"sqlite:///{project / 'new.db'}", "--app", "app_module.py:app"]
    for args in (["tick", "nightly", "--at", "0001-01-01T00:00Z"], ["invoke", "submit", "now", "--payload", "{}"],
                 ["invoke", "submit", "keyed", "--payloads", "payloads.jsonl"]):
        assert_one_line_error(run_cli(*args, *options, cwd=project))
        assert not (project / "new.db").exists()


def test_submit_key_without_dedup_is_the_calls_idempotency_key(project: Path, store_url: str) -> None:
    options = ["--db", store_url, "--app", "app_module.py:app", "--json"]
    submit = ["invoke", "submit", "plain", "--payload", '{"id": 1}']
    first = run_cli(*submit, "--key", "order-42", *options, cwd=project)
    second = run_cli(*submit, "--key", "order-42", *options, cwd=project)
    other = run_cli(*submit, "--key", "order-43", *options, cwd=project)
    plain = run_cli(*submit, *options, cwd=project)
    handles = [json.loads(result.stdout)["handles"] for result in (first, second, other, plain)]
    assert handles[0] == handles[1]  # the same key again stores nothing and answers the first handle
    assert len({handles[0][0], handles[2][0], handles[3][0]}) == 3
    assert sum(len(rows) for name, rows in store_content(store_url).items() if name == "work_items") == 3
