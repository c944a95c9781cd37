"""A rate limit holds across worker processes: two ``vardiya worker --queue default`` processes share
one token bucket, so together they start no more items than the rate allows, and never touch the
items of another queue."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import sqlalchemy as sa

from vardiya.clock import SystemClock
from vardiya.invoke.invoker import Invoker
from vardiya.store import ItemState, open_store
from vardiya.store.schema import work_items

RATE = 20
ITEMS = 100

APP = f'''
from vardiya.app import App

app = App("paced")

@app.handler("ping", rate_limit="{RATE}/s")
def ping(record, context):
    return record["n"]

@app.handler("elsewhere", queue="other")
def elsewhere(record, context):
    return record["n"]
'''


def _worker(url: str, app: str, cwd: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VARDIYA_DB", "VARDIYA_APP")}
    return subprocess.Popen(
        [sys.executable, "-m", "vardiya", "worker", "--db", url, "--app", app, "--queue", "default",
         "--prefetch", "5", "--until-idle", "--json"],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_two_worker_processes_share_the_rate(store_url: str, tmp_path: Path) -> None:
    (tmp_path / "paced_app.py").write_text(textwrap.dedent(APP))
    sys.path.insert(0, str(tmp_path))
    try:
        import paced_app  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    store = open_store(store_url, clock=SystemClock())
    try:
        invoker = Invoker(store, paced_app.app)
        invoker.submit_many("ping", [{"n": n} for n in range(ITEMS)])
        other = invoker.submit("elsewhere", {"n": 1})
        workers = [_worker(store_url, f"{tmp_path / 'paced_app.py'}:app", tmp_path) for _ in range(2)]
        for process in workers:
            _out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err
        c = work_items.c
        with store.reading() as connection:
            rows = connection.execute(
                sa.select(c.claimed_at, c.lease_owner).where(c.kind == "call:ping", c.state == ItemState.SUCCEEDED)
            ).all()
        assert len(rows) == ITEMS
        assert len({row.lease_owner for row in rows}) == 2  # both processes took part
        claims = sorted(row.claimed_at for row in rows)
        # The burst (RATE) may start at once; every other item waits for its token.
        span = (claims[-1] - claims[0]).total_seconds()
        assert span >= (ITEMS - RATE) / RATE * 0.9, span
        # In any one second, at most the burst plus a second's refill start, over both processes.
        for index, first in enumerate(claims):
            within = sum(1 for moment in claims[index:] if (moment - first).total_seconds() <= 1.0)
            assert within <= 2 * RATE + 1, (index, within)
        assert store.items.get(other.id).state is ItemState.PENDING  # the queue 'other' was never claimed
    finally:
        store.close()
