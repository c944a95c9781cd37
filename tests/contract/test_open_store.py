"""Opening a store: bad input gets a one-line message, the right error class, and nothing is written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import sqlalchemy as sa

from vardiya.errors import (
    ConfigurationError,
    InvalidDatabaseURL,
    NotAStore,
    SchemaOutdated,
    SchemaTooNew,
    StoreError,
    StoreUnavailable,
    VardiyaError,
)
from vardiya.store import ItemState, SchemaState, head_revision, open_store, store_version, upgrade_store
from vardiya.store.schema import metadata

from ..support.postgres import fresh_database, table_names

VARDIYA_TABLES = {table.name for table in metadata.sorted_tables} | {"alembic_version"}

BAD_URLS = {
    "sqlite": [
        "vardiya.db",
        "/var/lib/vardiya.db",
        "mysql://user@localhost/vardiya",
        "sqlite+aiosqlite:///vardiya.db",
        "sqlite://",
        "sqlite:///:memory:",
    ],
    "postgresql": [
        "127.0.0.1:5432/postgres",
        "mysql+pymysql://user:secret@localhost/vardiya",
        "postgresql+asyncpg://postgres@127.0.0.1/postgres",
        "postgresql://postgres@127.0.0.1:5432",
        "oracle://scott:tiger@localhost/xe",
    ],
}


def _one_line(error: BaseException) -> str:
    message = str(error)
    assert message and "\n" not in message, f"not a one-line message: {message!r}"
    return message


def _raw_engine(url: str) -> sa.Engine:
    return sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))


def test_unusable_url_is_invalid_database_url(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VARDIYA_DB", raising=False)
    for url in BAD_URLS[backend]:
        with pytest.raises(InvalidDatabaseURL) as raised:
            open_store(url)
        message = _one_line(raised.value)
        assert isinstance(raised.value, ConfigurationError)
        assert "sqlite:///" in message or "postgresql://" in message, message  # says what would work
        assert "secret" not in message
    assert os.listdir(tmp_path) == []


def test_unreachable_store_is_store_unavailable(backend: str, tmp_path: Path) -> None:
    if backend == "postgresql":
        url = "postgresql://postgres@127.0.0.1:5999/postgres"
    else:
        url = f"sqlite:///{tmp_path}/no-such-directory/vardiya.db"

    with pytest.raises(StoreUnavailable) as raised:
        open_store(url, migrate=True)

    message = _one_line(raised.value)
    assert isinstance(raised.value, StoreError)
    if backend == "postgresql":
        assert "5999" in message
        assert isinstance(raised.value.__cause__, sa.exc.DBAPIError)  # the driver error is chained
    else:
        assert "no-such-directory" in message
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "content",
    [
        b"id,name\n1,Ay\xc5\x9fe\n2,Mehmet\n",
        b"SQLite format 3\x00" + b"\xff" * 200,  # the right magic, then garbage
        bytes(range(256)) * 40,
    ],
    ids=["csv", "corrupt-header", "binary"],
)
def test_file_that_is_not_sqlite_is_not_a_store_and_left_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "data.db"
    path.write_bytes(content)

    with pytest.raises(NotAStore) as raised:
        open_store(f"sqlite:///{path}")

    assert "data.db" in _one_line(raised.value)
    assert path.read_bytes() == content
    assert sorted(os.listdir(tmp_path)) == ["data.db"]  # no -wal / -shm / journal files


def test_directory_is_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(NotAStore) as raised:
        open_store(f"sqlite:///{tmp_path}")

    _one_line(raised.value)
    assert os.listdir(tmp_path) == []


def test_store_migrated_by_newer_vardiya_is_refused_untouched(store_url: str) -> None:
    open_store(store_url).close()
    engine = _raw_engine(store_url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text("UPDATE alembic_version SET version_num = 'ffff'"))
        tables_before = set(sa.inspect(engine).get_table_names())
        try:
            for attempt in (lambda: open_store(store_url), lambda: open_store(store_url, migrate=True)):
                with pytest.raises(SchemaTooNew) as raised:
                    attempt()
                message = _one_line(raised.value)
                assert "ffff" in message and head_revision() in message and "upgrade vardiya" in message
            with pytest.raises(SchemaTooNew):
                upgrade_store(store_url)
            assert store_version(store_url)[1].state is SchemaState.TOO_NEW

            with engine.connect() as connection:
                versions = list(connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())
            assert versions == ["ffff"]
            assert set(sa.inspect(engine).get_table_names()) == tables_before
        finally:
            # The PostgreSQL database is shared by the session: give it back at head.
            with engine.begin() as connection:
                connection.execute(
                    sa.text("UPDATE alembic_version SET version_num = :head"), {"head": head_revision()}
                )
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgres_without_schema_and_migrate_false_is_outdated() -> None:
    with fresh_database() as url:
        for attempt in (lambda: open_store(url), lambda: open_store(url, migrate=False)):
            with pytest.raises(SchemaOutdated) as raised:
                attempt()
            message = _one_line(raised.value)
            assert "has no vardiya schema" in message
            assert re.search(r"vardiya (--db \S+ )?db upgrade", message), message
        assert table_names(url) == set()


@pytest.mark.postgres
def test_postgres_is_migrated_by_upgrade(tmp_path: Path) -> None:
    with fresh_database() as url:
        before, after = upgrade_store(url)

        assert (before.state, after.state) == (SchemaState.EMPTY, SchemaState.CURRENT)
        assert table_names(url) == VARDIYA_TABLES
        with open_store(url) as store:
            assert store.version().current == head_revision()
            assert store.items.enqueue("call", {"x": 1}, key="k").state is ItemState.PENDING


def test_new_sqlite_file_is_created_and_migrated_on_first_open(tmp_path: Path) -> None:
    path = tmp_path / "state" / "vardiya.db"
    path.parent.mkdir()
    assert store_version(f"sqlite:///{path}")[1].state is SchemaState.EMPTY
    assert not path.exists()  # asking for the version creates nothing

    with open_store(f"sqlite:///{path}") as store:
        assert store.version().state is SchemaState.CURRENT
        store.items.enqueue("call", {"x": 1}, key="k")

    assert path.read_bytes().startswith(b"SQLite format 3\x00")
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        assert set(sa.inspect(engine).get_table_names()) == VARDIYA_TABLES
        with engine.connect() as connection:
            assert connection.execute(sa.text("PRAGMA journal_mode")).scalar_one() == "wal"
    finally:
        engine.dispose()
    with open_store(f"sqlite:///{path}", migrate=False) as again:  # already current: opens without migrating
        assert again.items.find("call", "k") is not None


def test_new_sqlite_file_with_migrate_false_is_outdated_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "vardiya.db"

    with pytest.raises(SchemaOutdated) as raised:
        open_store(f"sqlite:///{path}", migrate=False)

    assert "db upgrade" in _one_line(raised.value)
    assert os.listdir(tmp_path) == []


def test_every_open_error_is_a_vardiya_error(backend: str, tmp_path: Path) -> None:
    (tmp_path / "notes.db").write_text("not a database")
    urls = ["nope://x/y", f"sqlite:///{tmp_path}/notes.db", f"sqlite:///{tmp_path}/missing/x.db"]
    if backend == "postgresql":
        urls.append("postgresql://postgres@127.0.0.1:5999/postgres")
    for url in urls:
        with pytest.raises(VardiyaError):
            open_store(url)
