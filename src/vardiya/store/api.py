"""The store: one database, three primitives (work items, ledger, dedup keys) and the clock they use.

``open_store`` is the way in. It validates the URL, opens the database, and checks the schema version
before anything is written: a SQLite file is created and migrated on first use (``create=False``
refuses a store that does not exist yet, creating nothing: what read commands use); a PostgreSQL
database is migrated by ``vardiya db upgrade`` (so many machines never race to migrate); a store
migrated by a newer vardiya is refused untouched. Creating and upgrading hold the store's migration
lock (``migrate.upgrade``), so processes opening one store at once take turns.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, NoReturn

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine

from ..clock import Clock, SystemClock
from ..errors import SchemaOutdated, SchemaTooNew, StoreNotFound
from .controls import Controls
from .dedup import DedupKeys
from .engine import READ_ONLY, create_store_engine, driver_errors
from .failures import Failures
from .heartbeats import Heartbeats
from .invocations import Invocations
from .items import WorkItems
from .ledger import Ledger
from .migrate import SchemaState, SchemaVersion, head_revision, read_version, upgrade
from .rate_buckets import RateBuckets
from .schedules import Schedules
from .url import Backend, StoreURL, parse_store_url, resolve_store_url

__all__ = ["Store", "open_store", "upgrade_store"]


class Store:
    """A state store: ``items``, ``ledger`` and ``dedup`` over one database, timed by ``clock``."""

    def __init__(self, target: StoreURL, engine: Engine, clock: Clock) -> None:
        self.target = target
        self.engine = engine
        self.clock = clock
        self._reader = engine.execution_options(**{READ_ONLY: True})
        self.items = WorkItems(self)
        self.ledger = Ledger(self)
        self.dedup = DedupKeys(self)
        self.schedules = Schedules(self)
        #: What failed and why (tracebacks) and SLA misses (``failures.py``).
        self.failures = Failures(self)
        self.invocations = Invocations(self)
        #: What is paused, and manual runs queued unless paused (``controls.py``).
        self.controls = Controls(self)
        #: The schedulers and workers alive (``heartbeats.py``).
        self.heartbeats = Heartbeats(self)
        #: When a rate-limited handler's next token is due (``rate_buckets.py``).
        self.rate_buckets = RateBuckets(self)
        #: Whether ``open_store`` created this store (it had no vardiya schema): a service logs it.
        self.created = False

    @property
    def backend(self) -> Backend:
        """SQLite or PostgreSQL."""
        return self.target.backend

    @property
    def url(self) -> str:
        """The store's URL, password hidden."""
        return self.target.display

    def dialect_insert(self, table: sa.Table) -> Any:
        """An INSERT with ``on_conflict_do_*`` for this backend (both dialects spell upserts alike)."""
        if self.backend is Backend.POSTGRESQL:
            return postgresql.insert(table)
        return sqlite.insert(table)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sa.Connection]:
        """A write transaction (``BEGIN IMMEDIATE`` on SQLite); driver errors become ``StoreError``."""
        with driver_errors(self.target), self.engine.begin() as connection:
            yield connection

    @contextlib.contextmanager
    def reading(self) -> Iterator[sa.Connection]:
        """A read transaction that takes no write lock."""
        with driver_errors(self.target), self._reader.begin() as connection:
            yield connection

    def version(self) -> SchemaVersion:
        """The schema revision of the store and of this vardiya."""
        with self.reading() as connection:
            return read_version(connection)

    def close(self) -> None:
        """Release the database connections."""
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.url!r})"


def _open_engine(url: str | None) -> tuple[StoreURL, Engine]:
    target = parse_store_url(resolve_store_url(url))
    return target, create_store_engine(target)


def _check_version(target: StoreURL, version: SchemaVersion) -> None:
    if version.state is SchemaState.TOO_NEW:
        raise SchemaTooNew(
            f"the store at {target.display} was migrated by a newer vardiya (revision {version.current}, "
            f"this vardiya knows up to {version.head}); upgrade vardiya to use it"
        )


def _refuse_outdated(target: StoreURL, version: SchemaVersion) -> NoReturn:
    found = "has no vardiya schema" if version.current is None else f"is at revision {version.current}"
    raise SchemaOutdated(
        f"the store at {target.display} {found} and this vardiya needs {version.head}; "
        f"run: vardiya --db {target.display} db upgrade"
    )


def _refuse_missing(target: StoreURL) -> NoReturn:
    where = target.path if target.path is not None else target.display
    raise StoreNotFound(
        f"no vardiya store at {where}; create it with `vardiya --db {target.display} db upgrade`"
    )


def open_store(
    url: str | None = None, *, clock: Clock | None = None, migrate: bool | None = None, create: bool = True
) -> Store:
    """Open the store at ``url`` (else ``VARDIYA_DB``, else ``sqlite:///vardiya.db``).

    ``migrate`` applies missing migrations; by default it does so for SQLite and not for PostgreSQL,
    where ``vardiya db upgrade`` is a deliberate deployment step. ``create=False`` refuses a store that
    does not exist yet (no such SQLite file, or a database without vardiya's schema) with
    ``StoreNotFound``, creating nothing.
    """
    target, engine = _open_engine(url)
    should_migrate = migrate if migrate is not None else target.backend is Backend.SQLITE
    created = False
    try:
        if target.path is not None and not target.path.exists():
            # Connecting would create the SQLite file: refuse before anything is written.
            if not create:
                _refuse_missing(target)
            if not should_migrate:
                _refuse_outdated(target, SchemaVersion(current=None, head=head_revision(), state=SchemaState.EMPTY))
        with driver_errors(target), engine.connect() as connection:
            version = read_version(connection.execution_options(**{READ_ONLY: True}))
            _check_version(target, version)
            if version.state is SchemaState.EMPTY and not create:
                _refuse_missing(target)
            if version.state is not SchemaState.CURRENT:
                if not should_migrate:
                    _refuse_outdated(target, version)
                found = upgrade(connection)  # under the migration lock: found is what it really was
                _check_version(target, found)
                created = found.state is SchemaState.EMPTY
    except BaseException:
        engine.dispose()
        raise
    store = Store(target, engine, clock or SystemClock())
    store.created = created
    return store


def upgrade_store(url: str | None = None) -> tuple[SchemaVersion, SchemaVersion]:
    """Bring the store to this vardiya's head; returns the versions before and after.

    Safe to run from many processes at once: they take turns under the migration lock, and "before"
    is what each found holding it.
    """
    target, engine = _open_engine(url)
    try:
        with driver_errors(target), engine.connect() as connection:
            before = upgrade(connection)
            _check_version(target, before)
            after = read_version(connection)
    finally:
        engine.dispose()
    return before, after


def store_version(url: str | None = None) -> tuple[StoreURL, SchemaVersion]:
    """The schema version of the store at ``url``, without migrating anything."""
    target = parse_store_url(resolve_store_url(url))
    if target.backend is Backend.SQLITE and target.path is not None and not target.path.exists():
        return target, SchemaVersion(current=None, head=head_revision(), state=SchemaState.EMPTY)
    engine = create_store_engine(target)
    try:
        with driver_errors(target), engine.connect() as connection:
            return target, read_version(connection.execution_options(**{READ_ONLY: True}))
    finally:
        engine.dispose()
