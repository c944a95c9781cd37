"""``vardiya worker`` as real processes: SIGKILL mid-batch loses nothing, dedup commits nothing twice,
SIGTERM drains and exits 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from vardiya.store import open_store
from vardiya.store.records import AttemptOutcome
from vardiya.store.schema import work_items

RECORDS = 120
BATCH = 20

APP = '''
import time
from vardiya.app import App
from vardiya.invoke import FixedWait, RetryPolicy
from vardiya.invoke.handlers import Dedup

app = App("downstream")
DEDUP = {dedup}

def deliver(record, context):
    # the record's effect goes downstream in the transaction that also settles its dedup key
    with context.transaction() as connection:
        connection.exec_driver_sql("INSERT INTO downstream (record) VALUES ({mark})", (record["id"],))
    time.sleep(0.05)

app.handler(
    "deliver", model="stream", batch_size={batch}, policy="report_failures",
    retry=RetryPolicy(max_attempts=3, wait=FixedWait(seconds=0.1)),
    dedup=Dedup(window=3600, key=lambda record: str(record["id"])) if DEDUP else None,
)(deliver)

def slow(record, context):
    time.sleep(0.2)

app.handler("slow", model="async")(slow)
'''


def _engine(url: str) -> sa.Engine:
    return sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))


def _write_app(directory: Path, url: str, *, dedup: bool) -> str:
    mark = "%s" if url.startswith("postgresql") else "?"
    path = directory / "downstream_app.py"
    path.write_text(textwrap.dedent(APP.format(dedup=dedup, batch=BATCH, mark=mark)))
    return f"{path}:app"


def _worker(url: str, app: str, cwd: Path, *extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VARDIYA_DB", "VARDIYA_APP")}
    return subprocess.Popen(
        [sys.executable, "-m", "vardiya", "worker", "--db", url, "--app", app, "--lease", "1", "--prefetch", "1", *extra],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _downstream(url: str) -> dict[int, int]:
    engine = _engine(url)
    with engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT record, COUNT(*) FROM downstream GROUP BY record").all()
    engine.dispose()
    return {int(record): count for record, count in rows}


def _prepare(url: str) -> None:
    engine = _engine(url)
    with engine.begin() as connection:
        connection.exec_driver_sql("DROP TABLE IF EXISTS downstream")
        connection.exec_driver_sql("CREATE TABLE downstream (record INTEGER NOT NULL)")
    engine.dispose()


def _kill_mid_batch(url: str, app: str, cwd: Path) -> None:
    from vardiya.app import load_app
    from vardiya.invoke.invoker import Invoker

    with open_store(url) as store:
        Invoker(store, load_app(app)).append_many("deliver", [{"id": i} for i in range(1, RECORDS + 1)])
    first = _worker(url, app, cwd)
    deadline = time.monotonic() + 60
    while sum(_downstream(url).values()) < BATCH + BATCH // 2:  # well inside the second batch
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "the worker made no progress"
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    second = _worker(url, app, cwd, "--until-idle")
    _out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err


@pytest.mark.slow
def test_sigkill_mid_batch_loses_nothing_and_dedup_commits_nothing_twice(store_url: str, tmp_path: Path) -> None:
    _prepare(store_url)
    app = _write_app(tmp_path, store_url, dedup=True)

    _kill_mid_batch(store_url, app, tmp_path)

    delivered = _downstream(store_url)
    assert sorted(delivered) == list(range(1, RECORDS + 1))  # nothing lost
    assert set(delivered.values()) == {1}  # nothing committed twice downstream
    with open_store(store_url) as store:
        batches = store.items.list(kind="batch:deliver")
        assert {item.state.value for item in batches} == {"succeeded"}
        crashed = [item for item in batches if any(
            attempt.outcome is AttemptOutcome.LEASE_EXPIRED for attempt in store.items.history(item.id)
        )]
        assert len(crashed) == 1 and crashed[0].attempts == 2  # the crash counted as an attempt


@pytest.mark.slow
def test_without_dedup_the_killed_batch_is_finished_at_least_once(store_url: str, tmp_path: Path) -> None:
    """The same drill without dedup keys: nothing is lost, and the records of the killed batch that had
    reached downstream before the kill reach it again (at-least-once). This is what dedup prevents."""
    _prepare(store_url)
    app = _write_app(tmp_path, store_url, dedup=False)

    _kill_mid_batch(store_url, app, tmp_path)

    delivered = _downstream(store_url)
    assert sorted(delivered) == list(range(1, RECORDS + 1))
    assert max(delivered.values()) == 2


def test_sigterm_drains_and_exits_0(store_url: str, tmp_path: Path) -> None:
    _prepare(store_url)
    app = _write_app(tmp_path, store_url, dedup=False)
    from vardiya.app import load_app
    from vardiya.invoke.invoker import Invoker

    with open_store(store_url) as store:
        Invoker(store, load_app(app)).submit_many("slow", [{"n": n} for n in range(30)])
    env = {k: v for k, v in os.environ.items() if k not in ("VARDIYA_DB", "VARDIYA_APP")}
    worker = subprocess.Popen(
        [sys.executable, "-m", "vardiya", "worker", "--db", store_url, "--app", app, "--prefetch", "10", "--json"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    with open_store(store_url) as store:
        deadline = time.monotonic() + 60
        while not any(item.state.value == "succeeded" for item in store.items.list(kind="call:slow")):
            assert worker.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=30)

    assert worker.returncode == 0, err
    import json

    report = json.loads(out)
    assert report["released"] > 0
    with open_store(store_url) as store:
        states = [item.state.value for item in store.items.list(kind="call:slow")]
        assert "running" not in states  # nothing left held: finished or released
        assert states.count("succeeded") == report["succeeded"]
        with store.reading() as connection:
            released = connection.execute(
                sa.select(sa.func.count()).select_from(work_items).where(
                    work_items.c.kind == "call:slow", work_items.c.state == "pending", work_items.c.attempts == 0
                )
            ).scalar_one()
        assert released == 30 - report["succeeded"]


@pytest.mark.postgres
def test_an_idle_worker_on_postgresql_wakes_on_notify_not_on_its_poll(postgres_url: str) -> None:
    """With a 30 s poll, only LISTEN/NOTIFY can make an idle worker start a new call within seconds."""
    import threading

    from vardiya.app import App
    from vardiya.invoke.invoker import Invoker
    from vardiya.service.worker import Worker, WorkerSettings
    from vardiya.store import ItemState

    started: list[float] = []
    app = App("wake")
    app.handler("ping", model="async")(lambda record, context: started.append(time.monotonic()))
    with open_store(postgres_url) as store:
        worker = Worker(store, app, WorkerSettings(poll_min=30, poll_max=30))
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        time.sleep(1.0)  # the worker has found nothing and is waiting
        submitted = time.monotonic()
        handle = Invoker(store, app).submit("ping", {"n": 1})
        deadline = submitted + 10
        while not started and time.monotonic() < deadline:
            time.sleep(0.01)
        worker.stop()
        thread.join(timeout=30)
        assert started and started[0] - submitted < 10
        assert store.items.get(handle.id).state is ItemState.SUCCEEDED
