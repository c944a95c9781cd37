"""A store with dead letters for the dashboard's tests: an app whose handler fails while a file exists."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import run_cli

#: The token the tests' dashboards use (VARDIYA_UI_TOKEN).
TOKEN = "test-token-0123456789abcdef"

APP = '''
from pathlib import Path
from vardiya import IterableSource, SlotScheme
from vardiya.app import App
from vardiya.invoke import FixedWait, RetryPolicy
from vardiya.pipeline import Pipeline, Static, same

app = App("meters")
BROKEN = Path(__file__).with_name("broken")

def validate(record, context):
    if BROKEN.exists() and record["id"] % 10 == 0:
        raise ValueError(f"reading {record['id']} is poison")
    return {"id": record["id"], "valid": True}

app.handler("validate", model="async", retry=RetryPolicy(max_attempts=2, wait=FixedWait(seconds=0.01)))(validate)

@app.slot_job("rolling", scheme=SlotScheme(slots=4), source=IterableSource(range(40)))
def rolling(record):
    if record == 13 and Path(__file__).with_name("broken_rolling").exists():
        raise ValueError("record 13 does not add up")

grid = Pipeline("grid")

@grid.stage(partitions=Static(keys=["north", "south"]))
def load(context):
    return [{"meter": context.partition, "kwh": 1.5}]

@grid.stage(partitions=Static(keys=["north", "south"]), depends_on={"load": same()})
def clean(context):
    if context.partition == "north" and Path(__file__).with_name("broken_clean").exists():
        raise ValueError("north's readings do not parse")
    return []

@grid.stage(partitions=Static(keys=["north", "south"]), depends_on={"clean": same()})
def report(context):
    return []

app.add_pipeline(grid, root=Path(__file__).parent / "out")
'''


def make_store(directory: Path, records: int = 20) -> list[str]:
    """Submit ``records`` readings and work them off: every tenth is a dead letter (the handler fails
    while ``directory/broken`` exists). Returns the global options naming the store and the app."""
    (directory / "meters_app.py").write_text(APP)
    (directory / "broken").touch()
    (directory / "readings.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(1, records + 1)))
    options = ["--db", f"sqlite:///{directory / 'v.db'}", "--app", f"{directory / 'meters_app.py'}:app"]
    submitted = run_cli("invoke", "submit", "validate", "--payloads", "readings.jsonl", *options, cwd=directory)
    assert submitted.code == 0, submitted.stderr
    worked = run_cli("worker", "--until-idle", "--json", *options, cwd=directory)
    assert worked.code == 0, worked.stderr
    assert json.loads(worked.stdout)["dead"] == records // 10
    ticked = run_cli("replay", "rolling", "--from", "2026-12-01T00:00:00Z", "--to", "2026-12-01T06:00:00Z", *options, cwd=directory)
    assert ticked.code == 0, ticked.stderr
    # the pipeline: clean@north fails (while broken_clean exists), so report@north is blocked
    (directory / "broken_clean").touch()
    ran = run_cli("pipeline", "run", f"{directory / 'meters_app.py'}:grid", "--root", "out", "--json", *options, cwd=directory)
    assert ran.code == 1, ran.stderr
    assert json.loads(ran.stdout)["failed"] == ["clean@north"]
    return options
