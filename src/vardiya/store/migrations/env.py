"""Alembic environment for vardiya's store: always run with a connection handed in by ``vardiya.store.migrate``."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from vardiya.store.schema import metadata

# A fixed key for PostgreSQL's advisory lock, so concurrent `vardiya db upgrade` runs take turns.
MIGRATION_LOCK_KEY = 0x76617264  # "vard"

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    if connection.dialect.name == "postgresql":
        connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
    context.run_migrations()
