"""Two ``vardiya tick`` processes on one slot, on both backends: no record runs twice, none is lost.

The app's handler is slow and appends one line per call to an effects file (``O_APPEND``, one
``write`` a line), so the file is what a non-idempotent sink would have written. The job has one slot a
day with runs at 00:01 and 00:31 (UTC), and a grace of an hour, so both runs are inside their window
whenever the test runs.

1. The :01 and the :31 run are started; the handler holds each run's first record until both runs
   hold a chunk at once (so they overlap however loaded the machine is). Together they hand every
   record to the handler exactly once, each skipping what the other holds.
2. The first run is SIGKILLed mid-chunk. Once its claims' (short) lease has run out, a second run
   finishes every record the first did not mark; only records of the chunk the kill interrupted (handed
   over, never marked) may run again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vardiya.clock import SystemClock
from vardiya.store import open_store

RECORDS = 160
CHUNK = 5  # flush_every: the records one claim covers
APP = f'''
import os
import time
from datetime import timedelta

from vardiya import App, IterableSource, SlotScheme

app = App("overlap")


@app.slot_job(
    "slow", scheme=SlotScheme(slots=1), source=IterableSource(range(1, {RECORDS} + 1)), runs_per_slot=2,
    offsets=[timedelta(minutes=1), timedelta(minutes=31)], backfill_limit=0, flush_every={CHUNK},
    deadline_grace=timedelta(hours=1), claim_lease=timedelta(seconds=float(os.environ["OVERLAP_LEASE_S"])),
)
def slow(record, context):
    go = os.environ["OVERLAP_GO"]
    if not os.path.exists(go):  # hold the first record until the test says go (both runs hold a chunk)
        with open(os.environ["OVERLAP_READY"], "a", encoding="utf-8") as ready:
            ready.write(f"{{os.getpid()}}\\n")
        ends = time.monotonic() + 120
        while not os.path.exists(go) and time.monotonic() < ends:
            time.sleep(0.01)
    with open(os.environ["OVERLAP_EFFECTS"], "a", encoding="utf-8") as effects:
        effects.write(f"{{os.getpid()}} {{record}}\\n")
    time.sleep(float(os.environ["OVERLAP_PAUSE_S"]))
'''
TIMEOUT_S = 180


def _today() -> str:
    return SystemClock().now().astimezone(UTC).strftime("%Y-%m-%d")


def _start(tmp_path: Path, store_url: str, at: str, *, lease_s: float, pause_s: float) -> subprocess.Popen[str]:
    env = {
        key: value for key, value in os.environ.items() if key not in ("VARDIYA_DB", "VARDIYA_APP")
    } | {
        "OVERLAP_EFFECTS": str(tmp_path / "effects.txt"), "OVERLAP_LEASE_S": str(lease_s),
        "OVERLAP_PAUSE_S": str(pause_s), "OVERLAP_GO": str(tmp_path / "go"),
        "OVERLAP_READY": str(tmp_path / "ready.txt"),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "vardiya", "--app", "app.py:app", "--db", store_url, "tick", "slow", "--at",
         f"{_today()}T{at}Z", "--json"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _effects(tmp_path: Path) -> list[tuple[int, int]]:
    path = tmp_path / "effects.txt"
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(int(pid), int(record)) for pid, record in (line.split() for line in lines if line.count(" ") == 1)]


def _wait_for(condition, what: str, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    ends = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > ends:
            pytest.fail(f"timed out after {timeout} s waiting for {what}", pytrace=False)
        time.sleep(0.02)


def _report(process: subprocess.Popen[str]) -> dict:
    out, err = process.communicate(timeout=TIMEOUT_S)
    assert process.returncode == 0, err
    return json.loads(out)


@pytest.fixture
def project(tmp_path: Path, store_url: str) -> str:
    (tmp_path / "app.py").write_text(APP, encoding="utf-8")
    open_store(store_url).close()  # migrated once, before the processes open it
    return store_url


def test_two_tick_processes_on_one_slot_hand_every_record_over_once(tmp_path: Path, project: str) -> None:
    first = _start(tmp_path, project, "00:01", lease_s=30, pause_s=0.02)
    second = None
    try:
        ready = tmp_path / "ready.txt"
        _wait_for(ready.exists, "the first run to hold its first chunk")
        second = _start(tmp_path, project, "00:31", lease_s=30, pause_s=0.02)
        # both runs inside their first chunk at once: the overlap the test is about, however loaded the machine
        _wait_for(lambda: len(set(ready.read_text().split())) == 2, "the second run to hold a chunk too", timeout=120)
        (tmp_path / "go").touch()
        a, b = _report(first), _report(second)
    finally:
        (tmp_path / "go").touch()
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(timeout=30)
    calls = Counter(record for _pid, record in _effects(tmp_path))
    twice = sorted(record for record, count in calls.items() if count > 1)
    assert twice == [], f"records handed to the handler twice: {twice}"
    assert sorted(calls) == list(range(1, RECORDS + 1))
    assert a["started"] + b["started"] == RECORDS and a["done"] + b["done"] == RECORDS
    assert a["started"] > 0 and b["started"] > 0 and a["held"] + b["held"] > 0  # shared, each skipped the other's
    with open_store(project) as store:
        assert store.ledger.count_done("slow", _today(), slot=0) == RECORDS


def test_after_the_first_run_is_killed_a_second_finishes_what_it_left(tmp_path: Path, project: str) -> None:
    lease_s = 1.5
    (tmp_path / "go").touch()  # no holding back: one run at a time here
    first = _start(tmp_path, project, "00:01", lease_s=lease_s, pause_s=0.05)
    try:
        _wait_for(lambda: len(_effects(tmp_path)) >= 3 * CHUNK + 2, "the first run to be inside its fourth chunk")
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        first.stdout.close()  # type: ignore[union-attr]
        first.stderr.close()  # type: ignore[union-attr]
    assert first.returncode == -signal.SIGKILL
    period = _today()
    with open_store(project, clock=SystemClock()) as store:
        marked = {int(row.record) for row in store.ledger.rows("slow", period)}
        assert store.ledger.claims.held("slow", period, store.clock.now()), "the killed run held no claim"
        # the killed run's claims stay until their lease runs out (nothing renews them any more)
        _wait_for(lambda: store.ledger.claims.held("slow", period, store.clock.now()) == {}, "the lease to run out")
    handed_before = {record for _pid, record in _effects(tmp_path)}
    unmarked = handed_before - marked
    assert 0 < len(marked) < RECORDS and len(unmarked) <= CHUNK

    report = _report(_start(tmp_path, project, "00:31", lease_s=lease_s, pause_s=0.0))
    assert (report["already_done"], report["held"], report["failed"]) == (len(marked), 0, 0)
    assert report["started"] == RECORDS - len(marked)
    calls = Counter(record for _pid, record in _effects(tmp_path))
    assert sorted(calls) == list(range(1, RECORDS + 1))
    twice = {record for record, count in calls.items() if count > 1}
    assert twice <= unmarked, f"records marked done were run again: {sorted(twice - unmarked)}"
    assert all(count <= 2 for count in calls.values())
    with open_store(project) as store:
        assert store.ledger.count_done("slow", period, slot=0) == RECORDS
        assert store.ledger.claims.held("slow", period, datetime(2000, 1, 1, tzinfo=UTC)) == {}  # none left
