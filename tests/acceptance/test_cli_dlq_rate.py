"""``vardiya dlq redrive --rate`` reads its rate as a handler's ``rate_limit`` is read (one parser,
``rules.rates.parse_rate_limit``): per second, minute or hour; a bad one is one line, exit 2, and
redrives nothing."""

from __future__ import annotations

import itertools
import json
import textwrap
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.support.cli import assert_one_line_error, run_cli
from vardiya.store import ItemState, open_store

APP = """
from vardiya.app import App
from vardiya.invoke.retry import FixedWait, RetryPolicy

app = App("poison")

@app.handler("validate", retry=RetryPolicy(max_attempts=1, wait=FixedWait(seconds=0)))
def validate(reading, context):
    raise ValueError(f"reading {reading['id']} is poison")
"""


@pytest.fixture(scope="module")
def dead(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Three dead letters of ``validate``."""
    cwd = tmp_path_factory.mktemp("dlq-rate")
    (cwd / "poison.py").write_text(textwrap.dedent(APP))
    options = ["--db", f"sqlite:///{cwd / 'v.db'}", "--app", "poison.py:app"]
    for reading in range(3):
        assert run_cli("invoke", "submit", "validate", "--payload", json.dumps({"id": reading}), *options, cwd=cwd).code == 0
    assert run_cli("worker", "--until-idle", *options, cwd=cwd).code == 0
    assert json.loads(run_cli("dlq", "list", "--json", *options, cwd=cwd).stdout)["total"] == 3
    return cwd, options


@pytest.mark.parametrize(
    ("rate", "says"),
    [("0.5/s", "cannot read the rate limit '0.5/s'"), ("10", "cannot read"), ("10/fortnight", "unknown unit 'fortnight'"),
     ("0/m", "lets nothing run"), ("fast", "cannot read")],
)
def test_a_bad_rate_is_one_line_exit_2_and_redrives_nothing(dead: tuple[Path, list[str]], rate: str, says: str) -> None:
    cwd, options = dead
    result = run_cli("dlq", "redrive", "--rate", rate, *options, cwd=cwd)
    assert_one_line_error(result, f"--rate {rate!r} is not a rate", says, "'100/s'")
    assert json.loads(run_cli("dlq", "list", "--json", *options, cwd=cwd).stdout)["total"] == 3


def test_a_rate_per_minute_spaces_the_redriven_items(dead: tuple[Path, list[str]]) -> None:
    cwd, options = dead
    dry = json.loads(run_cli("dlq", "redrive", "--rate", "30/m", "--dry-run", "--json", *options, cwd=cwd).stdout)
    assert dry["dry_run"] and dry["items"] == 3 and dry["rate_per_s"] == 0.5
    text = run_cli("dlq", "redrive", "--rate", "30/m", "--dry-run", *options, cwd=cwd, env={"COLUMNS": "200"})
    assert "would redrive 3 dead letter(s), 3 record(s), at 0.5/s until" in text.stdout
    done = json.loads(run_cli("dlq", "redrive", "--rate", "30/m", "--json", *options, cwd=cwd).stdout)
    assert done["items"] == 3 and done["rate_per_s"] == 0.5
    with open_store(f"sqlite:///{cwd / 'v.db'}") as store:
        items = [store.items.get(item_id) for item_id in done["ids"]]
    ready = sorted(item.run_after for item in items if item is not None)
    # 30 a minute: two seconds apart, the last of three ready four seconds after the first
    assert [later - earlier for earlier, later in itertools.pairwise(ready)] == [timedelta(seconds=2)] * 2
    assert abs(datetime.fromisoformat(done["last_ready_at"]) - ready[-1]) < timedelta(seconds=1)  # the report's own clock read
    assert {item.state for item in items if item is not None} == {ItemState.PENDING}
