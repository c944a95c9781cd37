"""Two ``vardiya scheduler`` processes and a ``vardiya worker`` running a periodic function every second.

What must hold on each backend: every planned second between the first and the last is one work item
(none twice, none lost), the two schedulers' reports together count each item once, and the worker
called the function once per planned time, with that time.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from vardiya.store import ItemState, open_store

from ..support.cli import run_cli
from ..support.services import wait_for

pytestmark = pytest.mark.slow

APP = '''
from datetime import timedelta
from pathlib import Path

from vardiya import App

app = App("periodic-processes")
calls = Path(__file__).parent / "calls.txt"

@app.every(timedelta(seconds=1))
def beat(planned_at):
    with calls.open("a") as handle:
        handle.write(planned_at.isoformat() + "\\n")
'''


def _start(tmp_path: Path, name: str, *args: str) -> subprocess.Popen[str]:
    with (tmp_path / f"{name}.log").open("w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "vardiya", *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=log, text=True
        )


def _planned(key: str) -> datetime:
    return datetime.strptime(key, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def test_two_scheduler_processes_enqueue_each_planned_time_once(store_url: str, tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(APP)
    env = ["--app", "jobs.py:app", "--db", store_url]
    assert run_cli("db", "upgrade", *env[2:], cwd=tmp_path).code == 0
    processes = {
        name: _start(tmp_path, name, *command, *env)
        for name, command in (
            ("scheduler-1", ["scheduler", "--json", "--poll-max", "0.2"]),
            ("scheduler-2", ["scheduler", "--json", "--poll-max", "0.2"]),
            ("worker", ["worker", "--json"]),
        )
    }
    store = open_store(store_url)
    try:
        def enough() -> bool:
            items = store.items.list(kind="periodic:beat", limit=1000)
            return sum(item.state is ItemState.SUCCEEDED for item in items) >= 5

        wait_for(enough, timeout=60, what="5 periodic runs")
        reports = {}
        for name in ("scheduler-1", "scheduler-2", "worker"):
            process = processes[name]
            process.send_signal(signal.SIGTERM)
            out, _ = process.communicate(timeout=30)
            assert process.returncode == 0, (tmp_path / f"{name}.log").read_text()
            reports[name] = json.loads(out)
        items = sorted(store.items.list(kind="periodic:beat", limit=1000), key=lambda item: item.key)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
        store.close()
    planned = [_planned(item.key) for item in items]
    assert planned == [planned[0] + timedelta(seconds=n) for n in range(len(planned))]  # none lost, none twice
    assert reports["scheduler-1"]["fired"] + reports["scheduler-2"]["fired"] == len(items)
    succeeded = [item for item in items if item.state is ItemState.SUCCEEDED]
    calls = (tmp_path / "calls.txt").read_text().split()
    assert sorted(datetime.fromisoformat(call) for call in calls) == [_planned(item.key) for item in succeeded]
    assert reports["worker"]["periodic_runs"] == len(succeeded)
