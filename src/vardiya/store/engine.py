"""Opening a database for the store, and the boundary where driver errors become vardiya errors.

SQLite: WAL so readers never wait for the writer, ``synchronous=NORMAL`` (durable at checkpoints, the
usual WAL setting), a busy timeout so several local processes queue for the write lock instead of
failing, and ``BEGIN IMMEDIATE`` for every write transaction so a claim takes the write lock at its
start: two processes can never both read the same ready rows and then both update them.

PostgreSQL: psycopg 3, a short connect timeout so an unreachable server is reported at once.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

from ..errors import NotAStore, StoreError, StoreUnavailable
from ..hashing import register_sqlite_functions
from .types import dumps_json
from .url import Backend, StoreURL

__all__ = [
    "READ_ONLY",
    "DriverConnection",
    "create_store_engine",
    "driver_errors",
    "first_line",
    "store_error_of",
    "postgres_engine",
    "sqlite_engine",
]

T = TypeVar("T")

SQLITE_BUSY_TIMEOUT_MS = 30_000
SQLITE_HEADER = b"SQLite format 3\x00"

#: Execution option that makes a SQLite transaction start as a plain (deferred) BEGIN, for reads.
READ_ONLY = "vardiya_read_only"


def first_line(error: BaseException) -> str:
    """The first line of a driver error's message, for one-line reports."""
    text = str(getattr(error, "orig", None) or error).strip()
    return text.splitlines()[0] if text else type(error).__name__


@contextlib.contextmanager
def driver_errors(target: StoreURL) -> Iterator[None]:
    """Turn driver and SQLAlchemy errors raised inside the block into ``StoreError`` subclasses."""
    try:
        yield
    except (sa.exc.SQLAlchemyError, sqlite3.Error) as error:
        raise store_error_of(target, error) from error
    except Exception as error:  # psycopg's own, from a raw connection (PostgresStatement)
        if not _is_psycopg_error(error):
            raise
        raise store_error_of(target, error) from error


def store_error_of(target: StoreURL, error: BaseException) -> StoreError:
    """The ``StoreError`` that ``driver_errors`` raises for ``error``."""
    if isinstance(error, sa.exc.DBAPIError):
        return _store_error(target, error, getattr(error, "orig", None), isinstance(error, sa.exc.OperationalError))
    if isinstance(error, sqlite3.Error):  # raised by a DriverConnection, which SQLAlchemy does not see
        return _store_error(target, error, error, isinstance(error, sqlite3.OperationalError))
    if _is_psycopg_error(error):  # raised by a PostgresStatement
        return _store_error(target, error, error, _psycopg_operational(error))
    return StoreError(f"store operation failed on {target.display}: {first_line(error)}")


def _is_psycopg_error(error: BaseException) -> bool:
    return type(error).__module__.startswith("psycopg")


def _psycopg_operational(error: BaseException) -> bool:
    import psycopg

    return isinstance(error, psycopg.OperationalError)


def _store_error(target: StoreURL, error: BaseException, orig: Any, operational: bool) -> StoreError:
    message = first_line(error)
    if target.backend is Backend.SQLITE and "file is not a database" in message:
        return NotAStore(
            f"{target.path} is not a SQLite database; point --db at a vardiya store or a new file"
        )
    if operational and _is_connection_failure(orig, message):
        return StoreUnavailable(
            f"cannot reach the store at {target.display}: {message}; check that the server runs "
            "and --db / VARDIYA_DB is right"
        )
    return StoreError(f"store operation failed on {target.display}: {message}")


def _is_connection_failure(orig: Any, message: str) -> bool:
    if isinstance(orig, sqlite3.OperationalError):
        return "unable to open database file" in message
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is present whenever a PostgreSQL URL works
        return False
    if not isinstance(orig, psycopg.OperationalError):
        return False
    # A failed connect has no SQLSTATE; class 08 and 57P01-57P03 are lost or refused connections.
    # Other OperationalErrors (deadlock 40P01, lock timeout 55P03, cancel 57014) reached the server.
    sqlstate = getattr(orig, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith("08") or sqlstate in ("57P01", "57P02", "57P03")


def create_store_engine(target: StoreURL) -> Engine:
    """An Engine for the store, configured for its backend. Does not connect yet."""
    if target.backend is Backend.SQLITE:
        return _sqlite_engine(target)
    return _postgres_engine(target)


def _check_sqlite_file(target: StoreURL) -> None:
    """Refuse a file that is not SQLite before SQLite touches it, and a directory that does not exist."""
    path = target.path
    assert path is not None
    if path.is_dir():
        raise NotAStore(f"{path} is a directory; give a file such as sqlite:///{path}/vardiya.db")
    if not path.parent.exists():
        raise StoreUnavailable(
            f"cannot create the SQLite store {path}: directory {path.parent} does not exist; create it first"
        )
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
        if header != SQLITE_HEADER:
            raise NotAStore(f"{path} is not a SQLite database; point --db at a vardiya store or a new file")


def _sqlite_engine(target: StoreURL) -> Engine:
    _check_sqlite_file(target)
    return sqlite_engine(target, store=True)


def sqlite_engine(target: StoreURL, *, store: bool) -> Engine:
    """A SQLite engine with vardiya's SQL functions and explicit transactions.

    ``store`` adds the store's settings (WAL, ``synchronous=NORMAL``, foreign keys) and ``BEGIN
    IMMEDIATE`` for writes; a user's database (a slot source) keeps its journal mode and gets plain
    ``BEGIN`` transactions.
    """
    engine = sa.create_engine(
        target.url,
        connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        json_serializer=dumps_json,
        pool_size=8,
        max_overflow=8,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        # Hand transaction control to the "begin" hook below instead of the sqlite3 module's guesses.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            if store:
                _enter_wal(cursor)
                cursor.execute("PRAGMA synchronous = NORMAL")
                cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()
        register_sqlite_functions(dbapi_connection)  # the stable slot hash, for pushdown

    @event.listens_for(engine, "begin")
    def _on_begin(connection: sa.Connection) -> None:
        if store and not connection.get_execution_options().get(READ_ONLY):
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            connection.exec_driver_sql("BEGIN")

    return engine


#: How often, and how long apart, a connection retries switching a store to WAL while another holds it.
_WAL_TRIES, _WAL_PAUSE_S = 600, 0.05


def _enter_wal(cursor: sqlite3.Cursor) -> None:
    """Put the store in WAL mode (a property of the file, kept once set), waiting for other connections.

    Switching needs the file to itself, and SQLite answers "database is locked" at once instead of
    waiting as the busy timeout makes other statements wait: processes opening a new (or a pre-WAL)
    store together failed here. So it is retried, for up to the busy timeout, and skipped when the
    file is in WAL mode already (every store after its first open).
    """
    if cursor.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
        return
    for attempt in range(_WAL_TRIES):
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or attempt == _WAL_TRIES - 1:
                raise
            time.sleep(_WAL_PAUSE_S)


class PostgresStatement:
    """psycopg connections in autocommit, for one statement that is a transaction of its own.

    Through SQLAlchemy a write transaction on PostgreSQL is four round trips (BEGIN, the statement, any
    NOTIFY, COMMIT) and about 150 µs of Python besides; a single statement in autocommit is one round
    trip, atomic as any statement is. The hot single writes use it: a single submit, and a worker's
    plain claims and completions (``WorkItems``, with ``generic=False``).

    One connection of its own (made by the engine, so with its settings, then detached from the pool)
    serves the calls of the process one at a time: no pool checkout and no autocommit switch per call,
    and its statements are prepared at once and planned once (``plan_cache_mode=force_generic_plan``:
    the store's connections force a custom plan, which for the enqueue statement is about 90 µs of
    planning at every call, as much as running it; its plan does not depend on the values bound). A
    call that finds it busy (another thread) takes a pooled connection as before. A connection that
    fails is dropped (the pooled one invalidated), and driver errors become ``StoreError``.
    """

    def __init__(self, engine: Engine, target: StoreURL, *, generic: bool = True) -> None:
        self._engine = engine
        self._target = target
        #: ``force_generic_plan`` on the own connection; False keeps the store's custom plans, for a
        #: statement whose best plan depends on what it is given (a completion's ids)
        self._generic = generic
        self._lock = threading.Lock()
        self._own: Any = None
        self._pid = 0
        event.listen(engine, "engine_disposed", self._close)

    def run(self, work: Callable[..., T], *args: Any) -> T:
        """``work(cursor, *args)`` on an autocommit cursor: the own connection's, or a pooled one's."""
        with driver_errors(self._target):
            if not self._lock.acquire(blocking=False):
                return self._run(work, *args)
            try:
                return self._run_own(work, *args)
            finally:
                self._lock.release()

    def _run_own(self, work: Callable[..., T], *args: Any) -> T:
        connection = self._own
        if connection is None or self._pid != os.getpid() or connection.closed:
            proxied = self._engine.raw_connection()
            connection = cast(Any, proxied.driver_connection)  # a pooled psycopg connection always has one
            proxied.detach()
            connection.autocommit = True
            if self._generic:
                connection.prepare_threshold = 0
                connection.execute("SET plan_cache_mode = force_generic_plan")
            self._own, self._pid = connection, os.getpid()
        try:
            with connection.cursor() as cursor:
                return work(cursor, *args)
        except Exception as error:
            if _is_psycopg_error(error) and _psycopg_operational(error):
                self._own = None
                with contextlib.suppress(Exception):
                    connection.close()
            raise

    def _run(self, work: Callable[..., T], *args: Any) -> T:
        proxied = self._engine.raw_connection()
        try:
            connection: Any = proxied.driver_connection
            connection.autocommit = True
            try:
                with connection.cursor() as cursor:
                    return work(cursor, *args)
            finally:
                connection.autocommit = False
        except Exception as error:
            if _is_psycopg_error(error) and _psycopg_operational(error):
                proxied.invalidate()
            raise
        finally:
            proxied.close()

    def _close(self, _engine: Engine) -> None:
        with self._lock:
            if self._own is not None and self._pid == os.getpid():
                with contextlib.suppress(Exception):
                    self._own.close()
            self._own = None


class DriverConnection:
    """One DBAPI connection of a SQLite store, used without SQLAlchemy for the hot statements.

    A transaction through SQLAlchemy (pool checkout, ``Connection``, events, result objects) costs about
    200 µs, against about 500 µs of SQLite work for a claim of 100 items and 12 µs for a transaction on
    the driver connection itself. The connection is made by the engine, so it has the store's pragmas
    and functions, and is then detached from the pool. The threads of the store share it under a lock
    (SQLite runs one writer at a time anyway). It is closed when the engine is disposed and reopened if
    the store is used again; a forked child opens its own instead of touching its parent's.
    """

    def __init__(self, engine: Engine, target: StoreURL | None = None) -> None:
        self._engine = engine
        self._target = target
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._cursor: sqlite3.Cursor | None = None
        self._pid = 0
        event.listen(engine, "engine_disposed", self._close)

    def _open(self) -> tuple[sqlite3.Connection, sqlite3.Cursor]:
        """The connection and its cursor for this process (under the lock)."""
        connection, cursor = self._connection, self._cursor
        if connection is None or cursor is None or self._pid != os.getpid():
            proxied = self._engine.raw_connection()
            # SQLAlchemy types the driver connection Any | None; a pooled sqlite3 connection always has one
            connection = self._connection = cast(sqlite3.Connection, proxied.driver_connection)
            proxied.detach()
            cursor = self._cursor = connection.cursor()
            self._pid = os.getpid()
        return connection, cursor

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction, committed when the block ends and rolled back if it raises.

        The block may roll back itself; the commit at the end is then a no-op.
        """
        with self._lock:
            connection, _cursor = self._open()
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
                connection.commit()
            finally:
                if connection.in_transaction:
                    connection.rollback()

    def run(self, work: Callable[..., T], *args: Any) -> T:
        """``work(cursor, *args)`` in a ``BEGIN IMMEDIATE`` transaction, committed when it returns.

        ``transaction`` for the hot statements, which run a few hundred times a second: no generator
        context managers, one cursor kept (so ``BEGIN`` and ``COMMIT`` are prepared statements the
        driver caches, where ``Connection.commit`` prepares its ``COMMIT`` every time), and driver errors
        turned into ``StoreError`` here (the ``target`` given at construction). ``work`` may roll back
        itself; nothing is committed then. Rolled back if ``work`` raises.
        """
        try:
            with self._lock:
                connection, cursor = self._open()
                cursor.execute("BEGIN IMMEDIATE")
                try:
                    result = work(cursor, *args)
                    if connection.in_transaction:
                        cursor.execute("COMMIT")
                    return result
                except BaseException:
                    if connection.in_transaction:
                        connection.rollback()
                    raise
        except (sa.exc.SQLAlchemyError, sqlite3.Error) as error:
            if self._target is None:
                raise
            raise store_error_of(self._target, error) from error

    def statement(self, sql: str, parameters: tuple[Any, ...]) -> list[Any]:
        """One write statement in autocommit, its rows fetched: a transaction of its own.

        For a write that is one statement (a single submit), ``run``'s ``BEGIN IMMEDIATE`` and
        ``COMMIT`` are two more driver calls for nothing: a write statement takes the write lock when
        it starts (waiting out the busy timeout, as ``BEGIN IMMEDIATE`` does) and commits when it is
        done, which the fetch of its rows makes happen before the lock is released here.
        """
        try:
            with self._lock:
                _connection, cursor = self._open()
                return cursor.execute(sql, parameters).fetchall()
        except (sa.exc.SQLAlchemyError, sqlite3.Error) as error:
            if self._target is None:
                raise
            raise store_error_of(self._target, error) from error

    def _close(self, _engine: Engine) -> None:
        with self._lock:
            if self._connection is not None and self._pid == os.getpid():
                self._connection.close()
            self._connection = None
            self._cursor = None


def _postgres_engine(target: StoreURL) -> Engine:
    return postgres_engine(target, application_name="vardiya", pool_size=8)


def postgres_engine(target: StoreURL, *, application_name: str, pool_size: int) -> Engine:
    """A PostgreSQL engine through psycopg 3, with a short connect timeout."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise StoreUnavailable(
            "PostgreSQL needs psycopg 3, which is not installed; run: pip install 'vardiya[postgres]'"
        ) from None
    return sa.create_engine(
        target.url,
        connect_args={
            "connect_timeout": 5,
            "application_name": application_name,
            # psycopg prepares a statement after 5 runs, and PostgreSQL may then switch to a generic
            # plan; for the ledger anti-join that plan rescans the period's rows for every candidate
            # (a tick slowed from 30k to 2k records/s when the ledger's statistics were stale).
            "options": "-c plan_cache_mode=force_custom_plan",
        },
        json_serializer=dumps_json,
        pool_size=pool_size,
        max_overflow=pool_size,
    )
