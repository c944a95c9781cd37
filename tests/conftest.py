"""Fixtures shared by every test layer: stores on both backends, a virtual clock.

PostgreSQL: set ``VARDIYA_TEST_POSTGRES`` to a server URL (for example
``postgresql://postgres@127.0.0.1:5432/postgres``). The suite creates a fresh database for the session
and drops it at the end. When the variable is set and the server cannot be reached, every PostgreSQL
test fails; it never skips. When the variable is not set, PostgreSQL tests are skipped with that reason.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from vardiya.clock import VirtualClock
from vardiya.store import Store, open_store
from vardiya.store.schema import metadata

POSTGRES_ENV = "VARDIYA_TEST_POSTGRES"
START = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)
BACKENDS = ["sqlite", "postgresql"]


def _run_order(item: pytest.Item) -> int:
    """Longest first: marked slow or README blocks, then real processes, then the CLI, then the rest."""
    if "slow" in item.keywords or "readme_blocks" in item.nodeid or "test_demo" in item.nodeid:
        return 0
    for rank, layer in enumerate(("tests/integration/", "tests/acceptance/"), start=1):
        if layer in item.nodeid:
            return rank
    return 3


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Slow tests first (a stable sort): run in parallel, they then overlap the many quick ones instead
    # of leaving one worker busy at the end.
    items.sort(key=_run_order)
    if os.environ.get(POSTGRES_ENV):
        return
    skip = pytest.mark.skip(reason=f"{POSTGRES_ENV} is not set: PostgreSQL tests not run")
    for item in items:
        callspec = getattr(item, "callspec", None)
        if "postgres" in item.keywords or (callspec is not None and callspec.params.get("backend") == "postgresql"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for the whole session; fails loudly when unreachable."""
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    admin_url = sa.make_url(server).set(drivername="postgresql+psycopg")
    name = f"vardiya_test_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5})
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except sa.exc.OperationalError as error:
        pytest.fail(f"{POSTGRES_ENV}={server} is set but PostgreSQL is unreachable: {error.orig}", pytrace=False)
    url = admin_url.set(database=name).render_as_string(hide_password=False).replace("+psycopg", "")
    open_store(url, migrate=True).close()
    try:
        yield url
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite store, copied for each test (migrating once is faster than per test)."""
    path = tmp_path_factory.mktemp("template") / "vardiya.db"
    open_store(f"sqlite:///{path}").close()
    return path


def _truncate(url: str) -> None:
    """Empty vardiya's tables of the session's PostgreSQL database, and drop every other table an
    earlier test left there (a sink's own table, such as the worker-process tests' ``downstream``), so
    each test starts from exactly the migrated schema, as a fresh SQLite store does."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as connection:
        names = ", ".join(table.name for table in metadata.sorted_tables)
        connection.exec_driver_sql(f"TRUNCATE {names} RESTART IDENTITY CASCADE")
        ours = set(metadata.tables) | {"alembic_version"}
        for name in sa.inspect(connection).get_table_names():
            if name not in ours:
                connection.exec_driver_sql(f'DROP TABLE "{name}" CASCADE')
    engine.dispose()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend a contract test runs on."""
    return str(request.param)


@pytest.fixture
def store_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty, migrated store on the test's backend."""
    if backend == "postgresql":
        url = str(request.getfixturevalue("postgres_url"))
        _truncate(url)
        return url
    template: Path = request.getfixturevalue("sqlite_template")
    path = tmp_path / "vardiya.db"
    shutil.copy(template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def clock() -> VirtualClock:
    """A virtual clock at 2026-12-01 00:00 UTC."""
    return VirtualClock(START)


@pytest.fixture
def store(store_url: str, clock: VirtualClock) -> Iterator[Store]:
    """An empty store on the test's backend, timed by the virtual clock."""
    opened = open_store(store_url, clock=clock)
    try:
        yield opened
    finally:
        opened.close()
