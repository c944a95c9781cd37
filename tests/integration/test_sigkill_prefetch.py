"""A worker killed with SIGKILL charges an attempt only to the items whose handler had started.

Items it had only prefetched (claimed, never started) go back without a charge: three kills of a
worker holding 20 prefetched calls used to leave 20 of 20 dead, 19 of them never run (issue 21).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from vardiya.app import load_app
from vardiya.invoke.invoker import Invoker
from vardiya.store import AttemptOutcome, ItemState, open_store

CALLS = 20
KILLS = 3

APP = '''
import os, time
from vardiya.app import App
from vardiya.invoke import FixedWait, RetryPolicy

app = App("prefetch")

def slow(record, context):
    # say it started (durably) before working, so the test knows which items a kill caught running
    with open(os.environ["STARTED_LOG"], "a") as log:
        log.write(f"{os.getpid()} {context.item_id}\\n")
        log.flush()
        os.fsync(log.fileno())
    time.sleep(float(os.environ.get("HANDLER_SLEEP", "0")))

app.handler("slow", model="async", retry=RetryPolicy(max_attempts=3, wait=FixedWait(seconds=0)))(slow)
'''


def _worker(url: str, app: str, cwd: Path, log: Path, sleep: float, *extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VARDIYA_DB", "VARDIYA_APP")}
    env.update(STARTED_LOG=str(log), HANDLER_SLEEP=str(sleep))
    return subprocess.Popen(
        [sys.executable, "-m", "vardiya", "worker", "--db", url, "--app", app, "--lease", "2", *extra],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _starts(log: Path) -> list[tuple[int, int]]:
    """(pid, item id) of every handler start so far."""
    if not log.exists():
        return []
    return [(int(pid), int(item)) for pid, item in (line.split() for line in log.read_text().splitlines() if line)]


def test_killed_worker_charges_only_started_items(store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "prefetch_app.py"
    path.write_text(textwrap.dedent(APP))
    app = f"{path}:app"
    log = tmp_path / "started.log"
    with open_store(store_url) as store:
        handles = Invoker(store, load_app(app)).submit_many("slow", [{"n": n} for n in range(CALLS)])
    ids = {handle.id for handle in handles}

    caught: list[set[int]] = []  # per kill: the items whose handler the killed worker had started
    for _kill in range(KILLS):
        # one thread, prefetch 20: it claims every ready call at once and runs them one by one
        worker = _worker(store_url, app, tmp_path, log, 0.4, "--prefetch", str(CALLS))
        deadline = time.monotonic() + 120
        while len([pid for pid, _item in _starts(log) if pid == worker.pid]) < 2:  # the second is running
            assert worker.poll() is None, worker.communicate()
            assert time.monotonic() < deadline, "the worker started no handler"
            time.sleep(0.02)
        worker.send_signal(signal.SIGKILL)
        worker.communicate(timeout=30)
        ran = {item for pid, item in _starts(log) if pid == worker.pid}
        with open_store(store_url) as store:
            # a call that ended before the kill was recorded when it ended (within ~50 ms), not held
            # for the claim's later ones: it stays done and is not run again
            done = {item for item in ran if store.items.get(item).state is ItemState.SUCCEEDED}
        assert done, "the call that ended before the kill was not recorded"
        caught.append(ran - done)

    # a worker that drains: it waits for the killed workers' leases to run out, then runs everything
    drain = _worker(store_url, app, tmp_path, log, 0.0, "--until-idle", "--concurrency", "2", "--prefetch", "5")
    out, err = drain.communicate(timeout=180)
    assert drain.returncode == 0, (out, err)

    started = set().union(*caught)
    assert len(started) < CALLS // 2  # most calls were only prefetched when their worker died
    with open_store(store_url) as store:
        for item_id in ids:
            item = store.items.get(item_id)
            history = [(a.outcome, a.owner is not None) for a in store.items.history(item_id)]
            charged = sum(item_id in items for items in caught)  # started, killed before recorded
            assert item.state is ItemState.SUCCEEDED, (item_id, item.state, history)
            # an item is charged once for every kill that caught its handler started, and only then
            assert item.attempts == charged + 1, (item_id, item.attempts, charged, history)
            assert [outcome for outcome, _ in history] == (
                [AttemptOutcome.LEASE_EXPIRED] * charged + [AttemptOutcome.SUCCEEDED]
            ), (item_id, history)
