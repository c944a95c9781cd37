"""Alembic environment for vardiya's store: always run with a connection handed in by ``vardiya.store.migrate``.

``migrate.upgrade`` runs Alembic inside its own transaction, which holds the migration lock (see
there). Run any other way (the tests' downgrades), the migrations are still one transaction under the
same lock: Alembic treats SQLite's DDL as non-transactional and would commit after every migration,
letting a second process in between (it found half-made tables: "table ... already exists",
"duplicate column"); SQLite's DDL is transactional, so it is told so.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from vardiya.store.migrate import MIGRATION_LOCK_KEY
from vardiya.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
    transactional_ddl=True,
)
with context.begin_transaction():
    if connection.dialect.name == "postgresql":
        connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
    context.run_migrations()
