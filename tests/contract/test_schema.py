"""The migrations produce exactly the schema the code declares, on both backends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from vardiya.store import open_store
from vardiya.store.migrate import head_revision
from vardiya.store.schema import metadata


def _declared_for(dialect: str) -> Callable[..., bool]:
    """Alembic's ``include_object`` that honours ``ddl_if(dialect=...)``, which its comparison ignores
    (sqlalchemy/alembic#1491): a constraint declared for another dialect is not expected here."""

    def include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        declared = obj if not reflected else compare_to
        condition = getattr(declared, "_ddl_if", None)
        if condition is None or condition.dialect is None:
            return True
        dialects = (condition.dialect,) if isinstance(condition.dialect, str) else condition.dialect
        return dialect in dialects

    return include


def test_migrated_store_matches_declared_schema(store_url: str) -> None:
    store = open_store(store_url)
    try:
        with store.engine.connect() as connection:
            context = MigrationContext.configure(
                connection,
                opts={
                    "compare_type": True,
                    "compare_server_default": True,
                    "include_object": _declared_for(connection.dialect.name),
                },
            )
            differences = compare_metadata(context, metadata)
            assert context.get_current_revision() == head_revision()
    finally:
        store.close()
    assert differences == []


def test_declared_indexes_exist(store_url: str) -> None:
    store = open_store(store_url)
    try:
        inspector = sa.inspect(store.engine)
        names = {index["name"] for index in inspector.get_indexes("work_items")}
    finally:
        store.close()
    assert {"ix_work_items_ready", "ix_work_items_leased", "ix_work_items_dead"} <= names


def test_item_keys_are_unique_on_both_backends_and_work_items_keeps_its_old_index_only_on_sqlite(
    store_url: str,
) -> None:
    store = open_store(store_url)
    try:
        inspector = sa.inspect(store.engine)
        key_columns = inspector.get_pk_constraint("work_item_keys")["constrained_columns"]
        item_uniques = {tuple(u["column_names"]) for u in inspector.get_unique_constraints("work_items")}
        sqlite = store.backend.value == "sqlite"
        if sqlite:
            with store.engine.connect() as connection:
                ddl = connection.exec_driver_sql(
                    "SELECT sql FROM sqlite_master WHERE name = 'work_item_keys'"
                ).scalar_one()
    finally:
        store.close()
    assert key_columns == ["kind", "key"]
    assert (("kind", "key") in item_uniques) is sqlite
    if sqlite:  # the key rows are the primary key's b-tree, with no rowid table beside it
        assert "WITHOUT ROWID" in ddl.upper()
