"""``add_slot_index``: the slot column and its index on a user's table, proven by the query plan."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from vardiya.errors import ConfigurationError
from vardiya.slots import SlotScheme, register_sqlite_functions
from vardiya.slots.index import SlotColumnKind, add_slot_index, index_name

IDS = [*range(1, 5001), -1, -7, -23, -24, -25, -4999]


def user_engine(url: str) -> sa.Engine:
    """A plain engine on the test's database; SQLite connections get the slot hash, as any writer needs."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    if engine.dialect.name == "sqlite":
        sa.event.listen(engine, "connect", lambda connection, _record: register_sqlite_functions(connection))
    return engine


@pytest.fixture
def users_url(store_url: str) -> Iterator[str]:
    """The store's database with a ``users`` table (ids ``IDS``, a name each); dropped afterwards."""
    engine = user_engine(store_url)
    with engine.begin() as connection:
        connection.exec_driver_sql("DROP TABLE IF EXISTS users")
        connection.exec_driver_sql("CREATE TABLE users (id BIGINT PRIMARY KEY, name TEXT NOT NULL)")
        connection.execute(
            sa.text("INSERT INTO users (id, name) VALUES (:id, :name)"),
            [{"id": record, "name": f"user {record}"} for record in IDS],
        )
    try:
        yield store_url
    finally:
        with engine.begin() as connection:
            connection.exec_driver_sql("DROP TABLE IF EXISTS users")
        engine.dispose()


def _slots(url: str, column: str) -> dict[int, int]:
    engine = user_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(sa.text(f"SELECT id, {column} FROM users")).all()
    finally:
        engine.dispose()
    return dict(rows)


def _execute(url: str, statement: str, rows: list[dict[str, object]] | None = None) -> None:
    engine = user_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text(statement), rows or [{}])
    finally:
        engine.dispose()


@pytest.mark.parametrize("assign", ["mod", "hash"])
def test_index_is_created_used_and_idempotent(backend: str, users_url: str, assign: str) -> None:
    scheme = SlotScheme(slots=24, assign=assign)

    first = add_slot_index(users_url, "users", id_column="id", scheme=scheme)
    second = add_slot_index(users_url, "users", id_column="id", scheme=scheme)

    column = f"vardiya_slot_24_{'hash1' if assign == 'hash' else 'mod'}"
    assert first.column == second.column == column
    assert first.index == second.index == f"ix_users_{column}"
    assert (first.created, second.created) == (True, False)
    expected_kind = {
        ("postgresql", "mod"): SlotColumnKind.STORED,
        ("postgresql", "hash"): SlotColumnKind.STORED,
        ("sqlite", "mod"): SlotColumnKind.VIRTUAL,
        ("sqlite", "hash"): SlotColumnKind.TRIGGERS,
    }[backend, assign]
    assert first.kind is expected_kind
    for report in (first, second):
        assert report.uses_index, report.plan
        assert any(report.index in line for line in report.plan)
        assert not report.plain_uses_index, report.plain_plan
        assert "% 24 = 15" in report.plain_query
        scan = "SCAN users" if backend == "sqlite" else "Seq Scan on users"
        assert any(scan in line for line in report.plain_plan), report.plain_plan
    document = json.loads(json.dumps(first.to_json()))
    assert document["kind"] == expected_kind.value
    assert document["uses_index"] is True and document["plan"] == first.plan


@pytest.mark.parametrize("assign", ["mod", "hash"])
def test_column_holds_the_scheme_slot_for_old_and_new_rows(users_url: str, assign: str) -> None:
    scheme = SlotScheme(slots=24, assign=assign)
    column = add_slot_index(users_url, "users", scheme=scheme).column

    assert _slots(users_url, column) == {record: scheme.slot_of(record) for record in IDS}

    added = [6000, 6001, 6023, -6000, 987654321]
    _execute(
        users_url,
        "INSERT INTO users (id, name) VALUES (:id, 'new')",
        [{"id": record} for record in added],
    )
    _execute(users_url, "UPDATE users SET id = 7001 WHERE id = 1")
    found = _slots(users_url, column)

    for record in [*added, 7001]:
        assert found[record] == scheme.slot_of(record), record
    assert 1 not in found
    assert len(found) == len(IDS) + len(added)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """An empty SQLite file that is not a store (the trigger tests are about SQLite only)."""
    path = tmp_path / "users.db"
    sqlite3.connect(path).close()
    return f"sqlite:///{path}"


def test_sqlite_hash_triggers_undo_a_hand_written_slot(sqlite_url: str) -> None:
    _execute(sqlite_url, "CREATE TABLE accounts (id TEXT PRIMARY KEY)")
    _execute(sqlite_url, "INSERT INTO accounts (id) VALUES (:id)", [{"id": f"acct-{n}"} for n in range(300)])
    scheme = SlotScheme(slots=24, assign="hash")
    report = add_slot_index(sqlite_url, "accounts", scheme=scheme)
    assert report.uses_index

    _execute(sqlite_url, f"UPDATE accounts SET {report.column} = 99 WHERE id = 'acct-7'")

    engine = user_engine(sqlite_url)
    try:
        with engine.connect() as connection:
            rows = dict(connection.execute(sa.text(f"SELECT id, {report.column} FROM accounts")).all())
    finally:
        engine.dispose()
    assert rows == {f"acct-{n}": scheme.slot_of(f"acct-{n}") for n in range(300)}


def test_sqlite_hash_triggers_work_on_a_without_rowid_table(sqlite_url: str) -> None:
    _execute(sqlite_url, "CREATE TABLE accounts (id TEXT PRIMARY KEY) WITHOUT ROWID")
    _execute(sqlite_url, "INSERT INTO accounts (id) VALUES ('a'), ('b')")
    scheme = SlotScheme(slots=24, assign="hash")
    column = add_slot_index(sqlite_url, "accounts", scheme=scheme).column

    _execute(sqlite_url, "INSERT INTO accounts (id) VALUES ('c')")
    _execute(sqlite_url, "UPDATE accounts SET id = 'd' WHERE id = 'a'")

    engine = user_engine(sqlite_url)
    try:
        with engine.connect() as connection:
            rows = dict(connection.execute(sa.text(f"SELECT id, {column} FROM accounts")).all())
    finally:
        engine.dispose()
    assert rows == {record: scheme.slot_of(record) for record in "bcd"}


def test_missing_triggers_are_restored_and_slots_repaired(sqlite_url: str) -> None:
    _execute(sqlite_url, "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    _execute(sqlite_url, "INSERT INTO users (id, name) VALUES (:id, 'x')", [{"id": n} for n in range(100)])
    scheme = SlotScheme(slots=24, assign="hash")
    column = add_slot_index(sqlite_url, "users", scheme=scheme).column
    _execute(sqlite_url, f"DROP TRIGGER {column}_users_insert")
    _execute(sqlite_url, "INSERT INTO users (id, name) VALUES (9001, 'unguarded')")
    assert _slots(sqlite_url, column)[9001] is None

    again = add_slot_index(sqlite_url, "users", scheme=scheme)

    assert again.created is True
    assert _slots(sqlite_url, column) == {n: scheme.slot_of(n) for n in [*range(100), 9001]}


def test_unknown_table_is_a_one_line_configuration_error(users_url: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        add_slot_index(users_url, "customers", scheme=SlotScheme(slots=24))

    message = str(caught.value)
    assert "'customers'" in message and "users" in message and "ledger" in message
    assert "\n" not in message


def test_unknown_id_column_is_a_one_line_configuration_error(users_url: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        add_slot_index(users_url, "users", id_column="user_id", scheme=SlotScheme(slots=24))

    message = str(caught.value)
    assert "'user_id'" in message and "id, name" in message
    assert "\n" not in message


def test_mod_over_text_ids_is_refused_with_a_hint(users_url: str) -> None:
    with pytest.raises(ConfigurationError, match="assign='hash'"):
        add_slot_index(users_url, "users", id_column="name", scheme=SlotScheme(slots=24))


def test_a_plain_column_with_the_slot_name_is_not_trusted(users_url: str) -> None:
    _execute(users_url, "ALTER TABLE users ADD COLUMN vardiya_slot_24_mod INTEGER")

    with pytest.raises(ConfigurationError, match="not a generated column"):
        add_slot_index(users_url, "users", scheme=SlotScheme(slots=24))


def test_long_names_stay_within_postgres_identifier_limit() -> None:
    name = index_name("t" * 80, "vardiya_slot_24_hash1")

    assert len(name) <= 63
    assert name != index_name("t" * 79 + "u", "vardiya_slot_24_hash1")
    assert index_name("users", "vardiya_slot_24_mod") == "ix_users_vardiya_slot_24_mod"
