"""Schema versions: which revision a store is at, and bringing it to this vardiya's head with Alembic."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError

from .engine import READ_ONLY

__all__ = ["SchemaState", "SchemaVersion", "head_revision", "read_version", "upgrade"]

MIGRATIONS = Path(__file__).parent / "migrations"


class SchemaState(str, enum.Enum):
    """How a store's schema compares with this vardiya's."""

    EMPTY = "empty"  # no vardiya schema yet
    CURRENT = "current"
    OUTDATED = "outdated"  # an older revision: `vardiya db upgrade` brings it forward
    TOO_NEW = "too_new"  # a revision this vardiya does not know: a newer vardiya migrated it


@dataclass(frozen=True, kw_only=True)
class SchemaVersion:
    """The revision a store is at, and the one this vardiya expects."""

    current: str | None
    head: str
    state: SchemaState


def _config(connection: sa.Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@lru_cache(maxsize=1)
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(_config())


def head_revision() -> str:
    """The newest revision this vardiya ships."""
    head = _scripts().get_current_head()
    assert head is not None
    return head


def read_version(connection: sa.Connection) -> SchemaVersion:
    """Where the store behind ``connection`` stands; reads only."""
    current = MigrationContext.configure(connection).get_current_revision()
    head = head_revision()
    if current is None:
        state = SchemaState.EMPTY
    elif current == head:
        state = SchemaState.CURRENT
    else:
        try:
            known = _scripts().get_revision(current) is not None
        except CommandError:
            known = False
        state = SchemaState.OUTDATED if known else SchemaState.TOO_NEW
    return SchemaVersion(current=current, head=head, state=state)


def upgrade(connection: sa.Connection) -> None:
    """Apply every migration the store lacks, in one committed transaction.

    Any transaction already open on ``connection`` (from reading the version) is ended first, so that
    Alembic's own transaction is the outermost one and its commit is real.
    """
    if connection.in_transaction():
        connection.rollback()
    # Migrate under the write lock from the start (BEGIN IMMEDIATE on SQLite), so two processes
    # opening a new store at once take turns instead of both creating tables.
    connection.execution_options(**{READ_ONLY: False})
    command.upgrade(_config(connection), "head")
    if connection.in_transaction():
        connection.commit()
