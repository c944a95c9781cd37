"""A store taken back to an older schema revision for the length of a test, then upgraded again."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from alembic import command

from vardiya.store import Store
from vardiya.store.migrate import _config, read_version


@contextmanager
def at_revision(store: Store, revision: str) -> Iterator[sa.Connection]:
    """Downgrade ``store`` to ``revision`` and yield a connection to it (commit what you write);
    whatever happens inside, the store is upgraded to head again afterwards."""
    engine = store.engine
    try:
        with engine.connect() as connection:
            command.downgrade(_config(connection), revision)
            connection.commit()
        with engine.connect() as connection:
            assert read_version(connection).current == revision
            yield connection
    finally:
        with engine.connect() as connection:
            command.upgrade(_config(connection), "head")
            connection.commit()
