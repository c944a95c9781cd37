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

__all__ = ["MIGRATION_LOCK_KEY", "SchemaState", "SchemaVersion", "head_revision", "read_version", "upgrade"]

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


#: PostgreSQL advisory lock key held while a store's version is checked and its schema upgraded ("vard").
MIGRATION_LOCK_KEY = 0x76617264


def upgrade(connection: sa.Connection) -> SchemaVersion:
    """Bring the store to head under the store's migration lock; returns the version found under it.

    The lock is held from before the version is read until the last migration commits, all in one
    transaction, so processes opening (or upgrading) a store at once take turns and each after the
    first finds the work done: on SQLite the transaction is ``BEGIN IMMEDIATE`` (the write lock; a
    second process waits for it up to the busy timeout), on PostgreSQL it takes an advisory lock first
    (a second process waits for it). Alembic runs inside that transaction (it never commits on its
    own). A store migrated by a newer vardiya (``TOO_NEW``) is left untouched: the caller refuses it.

    Any transaction already open on ``connection`` (from reading the version) is ended first.
    """
    if connection.in_transaction():
        connection.rollback()
    connection.execution_options(**{READ_ONLY: False})
    with connection.begin():
        if connection.dialect.name == "postgresql":
            connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        found = read_version(connection)
        if found.state in (SchemaState.EMPTY, SchemaState.OUTDATED):
            command.upgrade(_config(connection), "head")
    return found
