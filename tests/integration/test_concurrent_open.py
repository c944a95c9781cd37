"""Many processes opening one store at once: a new store and an old (0001) one, on both backends.

Each process must succeed: the version check and the upgrade hold the store's migration lock, and a
process that finds another upgrading waits for it (issue 21: 1-6 % of processes used to fail with
"database is locked", "table ... already exists", "duplicate column" or an Alembic traceback).

The processes are forked once per case and race through every round together (a barrier before
each), so the test pays for 16 processes once, not for 16 times the rounds.
"""

from __future__ import annotations

import multiprocessing
import shutil
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from vardiya.store import SchemaState, head_revision, open_store, store_version
from vardiya.store.migrate import _config

from ..support.cli import run_cli
from ..support.postgres import fresh_database

PROCESSES = 16
ROUNDS = 50
BARRIER_S = 300.0
FORK = multiprocessing.get_context("fork")


def _open_every_round(urls: list[str], start: Barrier, done: Barrier, conn: Connection) -> None:
    """In a forked child: open each round's store at the same moment as the siblings; report failures."""
    failures: list[str] = []
    for url in urls:
        start.wait(BARRIER_S)
        try:
            open_store(url, migrate=True).close()
        except BaseException:  # noqa: BLE001 - every failure goes back to the test
            failures.append(traceback.format_exc(limit=None))
        done.wait(BARRIER_S)
    conn.send(failures)
    conn.close()


def _race(urls: list[str], prepare: Callable[[int], None]) -> list[str]:
    """Fork the processes; before each round ``prepare(round)`` readies its store. Returns failures."""
    start = FORK.Barrier(PROCESSES + 1)
    done = FORK.Barrier(PROCESSES + 1)
    pipes, children = [], []
    for n in range(PROCESSES):
        receiving, sending = FORK.Pipe(duplex=False)
        child = FORK.Process(target=_open_every_round, args=(urls, start, done, sending), name=f"opener-{n}")
        child.start()
        sending.close()
        pipes.append(receiving)
        children.append(child)
    failures: list[str] = []
    try:
        for round_ in range(len(urls)):
            prepare(round_)
            start.wait(BARRIER_S)
            done.wait(BARRIER_S)
            target, version = store_version(urls[round_])
            assert version.state is SchemaState.CURRENT, (round_, target.display, version)
        for receiving in pipes:
            assert receiving.poll(BARRIER_S), "an opener reported nothing"
            failures.extend(receiving.recv())
    finally:
        for child in children:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
                child.join()
    return failures


def _at_0001(url: str) -> None:
    """Make the (empty) store at ``url`` a store at revision 0001, as the first vardiya left it."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as connection:
            command.upgrade(_config(connection), "0001")
            connection.commit()
    finally:
        engine.dispose()


@pytest.mark.parametrize("old", [False, True], ids=["new", "0001"])
def test_many_processes_open_one_sqlite_store_at_once(tmp_path: Path, old: bool) -> None:
    urls = [f"sqlite:///{tmp_path}/round-{n}.db" for n in range(ROUNDS)]
    template = tmp_path / "at-0001.db"
    if old:
        _at_0001(f"sqlite:///{template}")

    def prepare(round_: int) -> None:
        if old:
            shutil.copy(template, tmp_path / f"round-{round_}.db")

    assert _race(urls, prepare) == []


@pytest.mark.postgres
@pytest.mark.parametrize("old", [False, True], ids=["new", "0001"])
def test_many_processes_open_one_postgres_store_at_once(old: bool) -> None:
    with fresh_database() as url:
        engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1), poolclass=sa.NullPool)

        def prepare(_round: int) -> None:
            # every round on an empty database again (or one at 0001): cheaper than a database a round
            with engine.begin() as connection:
                connection.exec_driver_sql("DROP SCHEMA public CASCADE")
                connection.exec_driver_sql("CREATE SCHEMA public")
            if old:
                _at_0001(url)

        try:
            assert _race([url] * ROUNDS, prepare) == []
        finally:
            engine.dispose()


def test_cli_processes_racing_on_a_new_and_an_old_store(tmp_path: Path) -> None:
    """A few real ``vardiya db upgrade`` and ``vardiya status`` processes at once."""
    import subprocess
    import sys

    def race(*commands: list[str]) -> list[subprocess.CompletedProcess[str]]:
        running = [
            subprocess.Popen([sys.executable, "-m", "vardiya", *args], cwd=tmp_path, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for args in commands
        ]
        finished = []
        for process in running:
            out, err = process.communicate(timeout=300)
            finished.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
        return finished

    new = f"sqlite:///{tmp_path}/new.db"
    for finished in race(*[["db", "upgrade", "--db", new]] * 3):
        assert finished.returncode == 0, finished.stderr
    assert store_version(new)[1].current == head_revision()

    old = f"sqlite:///{tmp_path}/old.db"
    _at_0001(old)
    upgrades = race(*[["db", "upgrade", "--db", old]] * 2, *[["status", "--json", "--db", old]] * 2)
    for finished in upgrades:
        assert finished.returncode == 0, finished.stderr
        assert "Traceback" not in finished.stderr
    assert store_version(old)[1].current == head_revision()
    assert run_cli("db", "current", "--db", old, cwd=tmp_path).code == 0
