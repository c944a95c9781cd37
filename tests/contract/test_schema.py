"""The migrations produce exactly the schema the code declares, on both backends."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from vardiya.store import open_store
from vardiya.store.migrate import head_revision
from vardiya.store.schema import metadata


def test_migrated_store_matches_declared_schema(store_url: str) -> None:
    store = open_store(store_url)
    try:
        with store.engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"compare_type": True, "compare_server_default": True}
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
