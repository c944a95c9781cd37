from __future__ import annotations

from pathlib import Path

import pytest

from vardiya.errors import InvalidDatabaseURL
from vardiya.store import Backend, parse_store_url


def test_sqlite_urls() -> None:
    assert parse_store_url("sqlite:///vardiya.db").path == Path("vardiya.db")
    assert parse_store_url("sqlite:////tmp/x.db").path == Path("/tmp/x.db")
    assert parse_store_url("sqlite+pysqlite:///a.db").backend is Backend.SQLITE


def test_postgres_urls_use_psycopg() -> None:
    for text in ("postgresql://u@h/db", "postgres://u@h/db", "postgresql+psycopg://u@h/db"):
        target = parse_store_url(text)
        assert target.backend is Backend.POSTGRESQL
        assert target.url.drivername == "postgresql+psycopg"


def test_password_is_hidden_in_messages() -> None:
    assert "secret" not in parse_store_url("postgresql://u:secret@h/db").display


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("mysql://root@localhost/test", "unknown database URL scheme 'mysql'"),
        ("vardiya.db", "has no scheme"),
        ("sqlite://", "not a SQLite file"),
        ("sqlite:///:memory:", "in-memory"),
        ("postgresql+asyncpg://u@h/db", "psycopg"),
        ("postgresql://u@h", "names no database"),
    ],
)
def test_unusable_urls(text: str, fragment: str) -> None:
    with pytest.raises(InvalidDatabaseURL, match=fragment):
        parse_store_url(text)
