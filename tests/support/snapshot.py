"""The whole content of a store, to assert that bad input wrote nothing."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from vardiya.store.schema import metadata


def store_content(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every vardiya table (and the schema version), read through a fresh engine."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as connection:
            content = {
                table.name: sorted(map(tuple, connection.execute(sa.select(table)).all()), key=repr)
                for table in metadata.sorted_tables
            }
            content["alembic_version"] = sorted(connection.exec_driver_sql("SELECT * FROM alembic_version").all())
    finally:
        engine.dispose()
    return content
