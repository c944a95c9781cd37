"""``upsert`` on a natural key, on both backends: a second write of a key updates its row, never adds one."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from types import SimpleNamespace
from typing import Any

import pytest
import sqlalchemy as sa

from vardiya.errors import ConfigurationError, StoreError
from vardiya.slots.sinks import upsert
from vardiya.store import Store

KEY = ("user_id", "process_date")
DAY = date(2026, 12, 1)
NEXT_DAY = date(2026, 12, 2)


@pytest.fixture
def summaries(store: Store) -> Iterator[sa.Table]:
    """A user's table with the natural key (user_id, process_date), in the store's database."""
    metadata = sa.MetaData()
    table = sa.Table(
        "test_sink_daily_summaries",
        metadata,
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("process_date", sa.Date, nullable=False),
        sa.Column("plan", sa.String(20)),
        sa.Column("signups", sa.Integer),
        sa.PrimaryKeyConstraint(*KEY),
    )
    with store.transaction() as connection:
        metadata.drop_all(connection)
        metadata.create_all(connection)
    try:
        yield table
    finally:
        with store.transaction() as connection:
            metadata.drop_all(connection)


def _write(store: Store, table: sa.Table, rows: list[dict[str, Any]]) -> int:
    with store.transaction() as connection:
        return upsert(connection, table, rows, key=KEY)


def _rows(store: Store, table: sa.Table) -> list[tuple[Any, ...]]:
    with store.reading() as connection:
        return [tuple(row) for row in connection.execute(sa.select(table).order_by(*table.primary_key))]


def test_second_write_of_a_key_updates_its_row(store: Store, summaries: sa.Table) -> None:
    first = [
        {"user_id": 1, "process_date": DAY, "plan": "free", "signups": 3},
        {"user_id": 2, "process_date": DAY, "plan": "team", "signups": 5},
    ]
    assert _write(store, summaries, first) == 2
    assert _rows(store, summaries) == [(1, DAY, "free", 3), (2, DAY, "team", 5)]

    # The rerun writes user 1 again with new values, and user 1 for another day (a different key).
    second = [
        {"user_id": 1, "process_date": DAY, "plan": "business", "signups": 4},
        {"user_id": 1, "process_date": NEXT_DAY, "plan": "business", "signups": 0},
    ]
    assert _write(store, summaries, second) == 2
    assert _rows(store, summaries) == [
        (1, DAY, "business", 4),
        (1, NEXT_DAY, "business", 0),
        (2, DAY, "team", 5),
    ]

    # The same write again is harmless: nothing added, nothing changed.
    assert _write(store, summaries, second) == 2
    assert len(_rows(store, summaries)) == 3


def test_update_sets_only_the_columns_written(store: Store, summaries: sa.Table) -> None:
    _write(store, summaries, [{"user_id": 7, "process_date": DAY, "plan": "free", "signups": 1}])
    _write(store, summaries, [{"user_id": 7, "process_date": DAY, "signups": 9}])
    assert _rows(store, summaries) == [(7, DAY, "free", 9)]


def test_rows_of_key_columns_only_do_nothing_to_existing_rows(store: Store, summaries: sa.Table) -> None:
    _write(store, summaries, [{"user_id": 1, "process_date": DAY, "plan": "team", "signups": 2}])

    written = _write(store, summaries, [{"user_id": 1, "process_date": DAY}, {"user_id": 3, "process_date": DAY}])

    assert written == 2
    # The existing row is left as it was; the new key is inserted with its other columns empty.
    assert _rows(store, summaries) == [(1, DAY, "team", 2), (3, DAY, None, None)]


def test_no_rows_write_nothing(store: Store, summaries: sa.Table) -> None:
    _write(store, summaries, [{"user_id": 1, "process_date": DAY, "plan": "team", "signups": 2}])
    assert _write(store, summaries, []) == 0
    assert _rows(store, summaries) == [(1, DAY, "team", 2)]


def test_a_key_without_a_unique_constraint_is_an_error_not_a_second_insert(store: Store, summaries: sa.Table) -> None:
    _write(store, summaries, [{"user_id": 1, "process_date": DAY, "plan": "team", "signups": 2}])
    row = {"user_id": 1, "process_date": DAY, "plan": "free", "signups": 3}
    with pytest.raises(StoreError, match=r"conflict|ON CONFLICT"), store.transaction() as connection:
        upsert(connection, summaries, [row], key=["user_id"])
    assert _rows(store, summaries) == [(1, DAY, "team", 2)]


def test_other_databases_are_refused() -> None:
    connection: Any = SimpleNamespace(dialect=SimpleNamespace(name="mysql"))
    table = sa.Table("t", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True), sa.Column("v", sa.Integer))
    with pytest.raises(ConfigurationError, match="SQLite and PostgreSQL"):
        upsert(connection, table, [{"id": 1, "v": 2}], key=["id"])
