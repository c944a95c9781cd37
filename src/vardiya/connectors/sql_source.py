"""A slot job's records read from a SQL table, with the slot and the ledger pushed down into the query.

``SqlTableSource(url, table)`` selects one slot's ids in the database, never the whole table:

- **Slot predicate.** When the table has the stored slot column ``add_slot_index`` made for the scheme
  (``vardiya_slot_<B>_mod``, ``vardiya_slot_<B>_hash<version>``; see ``slot_column_name``), the query is
  ``slot_column = :slot`` and runs on the (slot, id) index. Otherwise it computes the slot in SQL:
  ``((id % B) + B) % B = :slot`` for ``mod``, the database's form of H for ``hash``; that is correct but
  scans the table.
- **Ledger.** When the table lives in the store's own database, the query also carries the ledger
  anti-join (``NOT EXISTS`` a settled ledger row, nor a live claim of another run), so only not-done
  ids leave the database. When it lives elsewhere, the ids are filtered through the slot's settled
  keys (``store.ledger.settled_in_slot``) and the keys live claims hold. Either way the tick's claim
  (``store.ledger.claims``) is what guarantees that no other run holds a record it hands over.
- **Streaming.** Ids come in chunks of ``chunk_size`` by keyset pagination (``... AND id > :last ORDER BY
  id LIMIT :n``), one short read per chunk with no transaction held between chunks: a tick's memory does
  not grow with the table, and a handler that runs for an hour holds no snapshot open. The id column
  should be the primary key (or indexed) so each chunk starts where the last one ended.

Names are validated against the reflected table and every statement is built with SQLAlchemy Core, so
no user input is ever formatted into SQL text.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..errors import ConfigurationError, InvalidDatabaseURL, InvalidInput, StoreError, StoreUnavailable
from ..hashing import HASH_VERSION, RecordId
from ..slots.hashing import hash_slot_sql, mod_slot_sql
from ..slots.scheme import Assign, SlotScheme
from ..store.engine import first_line, postgres_engine, sqlite_engine
from ..store.id_fingerprints import Fingerprint, fingerprint_columns, fingerprint_of
from ..store.url import Backend, StoreURL, parse_store_url

if TYPE_CHECKING:
    from ..store import Store

__all__ = ["SqlTableSource", "slot_column_name"]

DEFAULT_CHUNK_SIZE = 50_000
_LISTED_NAMES = 20  # names shown in an "unknown table/column" message before "and N more"


def slot_column_name(scheme: SlotScheme) -> str:
    """The stored slot column made for a scheme: ``vardiya_slot_24_mod``, ``vardiya_slot_24_hash1``.

    A record's slot depends only on B and assign (and H's version for hash), not on period, zone or
    layout, so those are all the name carries.
    """
    assign = f"hash{HASH_VERSION}" if scheme.assign is Assign.HASH else "mod"
    return f"vardiya_slot_{scheme.slots}_{assign}"


# -- opening the user's database (shared with vardiya.slots.index) -------------------------------------


def parse_source_url(url: str) -> StoreURL:
    """A validated SQLite or PostgreSQL URL (``postgresql://`` mapped to psycopg 3)."""
    if not isinstance(url, str):
        raise InvalidDatabaseURL(f"source database URL must be a string, got {url!r}")
    try:
        return parse_store_url(url)
    except InvalidDatabaseURL as error:
        raise InvalidDatabaseURL(f"source database: {error}") from None


def create_source_engine(target: StoreURL) -> Engine:
    """An Engine on a user's database. Connects lazily; never changes a SQLite file's journal mode.

    SQLite connections get ``vardiya_slot_hash`` (for hash pushdown and slot triggers) and an explicit
    ``BEGIN`` so that DDL and reads run in real transactions rather than the sqlite3 module's guesses.
    """
    if target.backend is Backend.SQLITE:
        assert target.path is not None
        if not target.path.is_file():
            raise ConfigurationError(
                f"source database {target.path} does not exist (or is not a file); "
                "give the SQLite file that holds the table"
            )
        return sqlite_engine(target, store=False)
    return postgres_engine(target, application_name="vardiya-source", pool_size=2)


@contextlib.contextmanager
def connect(engine: Engine, target: StoreURL, *, autocommit: bool = False) -> Iterator[sa.Connection]:
    """A connection to the user's database; driver errors become ``StoreUnavailable`` / ``StoreError``."""
    try:
        connection = engine.connect()
    except sa.exc.DBAPIError as error:
        raise StoreUnavailable(
            f"cannot reach the source database {target.display}: {first_line(error)}; "
            "check the URL and that the server runs"
        ) from error
    if autocommit:
        connection = connection.execution_options(isolation_level="AUTOCOMMIT")
    try:
        with connection:
            yield connection
    except sa.exc.SQLAlchemyError as error:
        message = f"query on the source database {target.display} failed: {first_line(error)}"
        raise StoreError(message) from error


def _listed(names: list[str]) -> str:
    if not names:
        return "none"
    shown = ", ".join(sorted(names)[:_LISTED_NAMES])
    more = len(names) - _LISTED_NAMES
    return f"{shown} and {more} more" if more > 0 else shown


def reflect_table(connection: sa.Connection, table: str, schema: str | None, display: str) -> sa.Table:
    """The table (or view) as the database has it; a ``ConfigurationError`` listing what exists if not."""
    for name, what in ((table, "table"), (schema, "schema")):
        if name is not None and (not isinstance(name, str) or not name):
            raise InvalidInput(f"{what} name must be a non-empty string, got {name!r}")
    try:
        return sa.Table(table, sa.MetaData(), autoload_with=connection, schema=schema)
    except sa.exc.NoSuchTableError:
        inspector = sa.inspect(connection)
        existing = inspector.get_table_names(schema=schema) + inspector.get_view_names(schema=schema)
        where = f"schema {schema!r} of {display}" if schema else display
        raise ConfigurationError(
            f"table {table!r} does not exist in {where}; tables there: {_listed(existing)}"
        ) from None


def require_column(table: sa.Table, column: str, role: str) -> sa.Column[Any]:
    """A column of the reflected table; a ``ConfigurationError`` listing the columns if it is not there."""
    if not isinstance(column, str) or not column:
        raise InvalidInput(f"{role} must be a non-empty column name, got {column!r}")
    if column not in table.c:
        raise ConfigurationError(
            f"table {table.name!r} has no column {column!r} ({role}); its columns: "
            f"{_listed([c.name for c in table.c])}"
        )
    return table.c[column]


def check_id_column(column: sa.Column[Any], scheme: SlotScheme) -> None:
    """Refuse id columns the scheme cannot place: text under mod, anything but integers and text."""
    kind = column.type
    if isinstance(kind, sa.types.NullType):
        return  # a SQLite column without a declared type: nothing to check before the values
    where = f"{column.table.name}.{column.name}"
    if scheme.assign is Assign.MOD and not isinstance(kind, sa.Integer):
        raise ConfigurationError(
            f"id column {where} is {kind} but assign='mod' needs integer ids; use assign='hash'"
        )
    if not isinstance(kind, (sa.Integer, sa.String)):
        raise ConfigurationError(
            f"id column {where} is {kind}; slot ids must be integers or text (use a view that casts it)"
        )


def slot_expression(
    column: sa.ColumnElement[Any], scheme: SlotScheme, dialect_name: str
) -> sa.ColumnElement[Any]:
    """The scheme's slot of ``column`` computed in SQL (floor modulo, or H mod B)."""
    if scheme.assign is Assign.HASH:
        return hash_slot_sql(column, scheme.slots, dialect_name)
    return mod_slot_sql(column, scheme.slots)


def _fetch_ids(connection: sa.Connection, page: sa.Select[Any]) -> list[RecordId]:
    """One page of ids, read from the driver's cursor.

    Ids are integers or text, which the drivers already return as ``int`` and ``str``; skipping
    SQLAlchemy's row objects roughly halves the cost of a page (see benchmarks/bench_slot_select.py).
    """
    result = connection.execute(page)
    try:
        return [row[0] for row in result.cursor.fetchall()]
    finally:
        result.close()


# -- the source -----------------------------------------------------------------------------------------


def _database_identity(target: StoreURL) -> str:
    """What two URLs share when they name one database: the real file, or the URL with its default port."""
    if target.backend is Backend.SQLITE:
        assert target.path is not None
        return f"sqlite:{os.path.realpath(target.path)}"
    url = target.url
    url = url.set(host=(url.host or "").lower(), port=url.port or 5432)
    return url.render_as_string(hide_password=False)


class SqlTableSource:
    """The ids of a table in SQLite or PostgreSQL, selected per slot in the database (see the module doc).

    ``slot_column`` names a stored slot column explicitly; it is the caller's promise that the column
    holds ``scheme.slot_of(id)`` for every scheme the source is used with (the first chunk of every
    selection is checked against that promise). Without it, the column ``add_slot_index`` makes for the
    scheme is used when present. ``schema`` is a PostgreSQL schema (or an attached SQLite database).
    """

    def __init__(
        self,
        url: str,
        table: str,
        *,
        id_column: str = "id",
        slot_column: str | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        schema: str | None = None,
    ) -> None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size <= 0:
            raise InvalidInput(f"chunk_size must be a positive integer, got {chunk_size!r}; e.g. 5000")
        names = ((table, "table"), (id_column, "id_column"), (slot_column, "slot_column"), (schema, "schema"))
        for value, role in names:
            if value is not None and (not isinstance(value, str) or not value):
                raise InvalidInput(f"{role} must be a non-empty string, got {value!r}")
        self._target = parse_source_url(url)
        self._table_name = table
        self._id_column = id_column
        self._slot_column = slot_column
        self._chunk_size = chunk_size
        self._schema = schema
        self._engine: Engine | None = None
        self._table: sa.Table | None = None

    @property
    def url(self) -> str:
        """The source database's URL, password hidden."""
        return self._target.display

    @property
    def engine(self) -> Engine:
        """The source's own engine, created on first use."""
        if self._engine is None:
            self._engine = create_source_engine(self._target)
        return self._engine

    @property
    def table(self) -> sa.Table:
        """The reflected table, its id (and explicit slot) column checked; reflected once, on first use."""
        if self._table is None:
            with connect(self.engine, self._target) as connection:
                table = reflect_table(connection, self._table_name, self._schema, self._target.display)
            require_column(table, self._id_column, "id_column")
            if self._slot_column is not None:
                require_column(table, self._slot_column, "slot_column")
            self._table = table
        return self._table

    def close(self) -> None:
        """Release the source's connections (it reconnects if used again)."""
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def __enter__(self) -> SqlTableSource:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqlTableSource({self.url!r}, {self._table_name!r})"

    # -- queries ------------------------------------------------------------------------------------

    def shares_database_with(self, store: Store) -> bool:
        """Whether the table is in the store's own database, so the ledger can be joined in SQL."""
        return _database_identity(self._target) == _database_identity(store.target)

    def stored_slot_column(self, scheme: SlotScheme) -> str | None:
        """The stored slot column the slot predicate uses for ``scheme``, or None to compute the slot."""
        if self._slot_column is not None:
            return self._slot_column
        name = slot_column_name(scheme)
        return name if name in self.table.c else None

    def _slot_predicate(self, scheme: SlotScheme, slot: int) -> sa.ColumnElement[bool]:
        scheme.window_index(slot)  # the slot's range check, with its message
        table = self.table
        record_id = table.c[self._id_column]
        check_id_column(record_id, scheme)
        column = self.stored_slot_column(scheme)
        if column is not None:
            return table.c[column] == slot
        return slot_expression(record_id, scheme, self.engine.dialect.name) == slot

    def _page(self, condition: sa.ColumnElement[bool], after: Any, size: int) -> sa.Select[Any]:
        record_id = self.table.c[self._id_column]
        query = sa.select(record_id).where(condition)
        if after is not None:
            query = query.where(record_id > after)
        return query.order_by(record_id).limit(size)

    def _check_stored_slots(self, scheme: SlotScheme, slot: int, ids: list[RecordId]) -> None:
        """An explicit slot column must agree with the scheme; a wrong one would silently skip records."""
        for record in ids:
            actual = scheme.slot_of(record)
            if actual != slot:
                raise ConfigurationError(
                    f"column {self._table_name}.{self._slot_column} does not hold the slots of scheme "
                    f"{scheme.fingerprint}: id {record!r} is in slot {actual}, the column says {slot}; "
                    "drop slot_column= or rebuild the column with `vardiya slots index`"
                )

    def records(
        self,
        *,
        store: Store,
        job: str,
        scheme: SlotScheme,
        period: str,
        slot: int,
        give_up_after: int | None,
        limit: int | None,
    ) -> Iterator[RecordId]:
        """The ids of ``slot`` under ``scheme`` not settled for ``period``, in id order, at most ``limit``."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidInput(f"limit must be None or a non-negative integer, got {limit!r}")
        predicate = self._slot_predicate(scheme, slot)  # validates now, not at the first next()
        same_database = self.shares_database_with(store)
        settled: set[str] | None = None
        ledger = store.ledger
        exact = ledger.count_settled(job, period, slot, give_up_after=give_up_after)
        # The whole slot settled, the usual answer for a backlog slot: by the ids' fingerprints, never
        # by count (as many settled rows as ids is not "settled" when a row is a deleted id's and a new
        # id has none; store/id_fingerprints.py). Different fingerprints: the exact selects below.
        if exact and self._integer_ids() and self._fingerprint(predicate) == ledger.settled_fingerprint(
            job, period, slot, give_up_after=give_up_after
        ):
            return iter(())
        # Nothing of the slot settled yet (its first run in the period): the plain indexed select.
        if exact or ledger.count_settled(job, period, slot, give_up_after=give_up_after, include_unslotted=True):
            if same_database:
                record_id = self.table.c[self._id_column]
                # Records another run holds right now are that run's: the claims are left out too.
                predicate = (
                    predicate
                    & store.ledger.not_done_clause(job, period, record_id, give_up_after=give_up_after)
                    & store.ledger.claims.free_clause(job, period, record_id, store.clock.now())
                )
            else:
                # One indexed read of the slot's settled keys (slot-sized, never table-sized) beats
                # probing the ledger with IN-lists chunk by chunk; held records are left out with them.
                settled = store.ledger.settled_in_slot(job, period, slot, give_up_after=give_up_after)
                settled.update(store.ledger.claims.held(job, period, store.clock.now()))
        return self._stream(store, scheme, slot, predicate, same_database, settled, limit)

    def _stream(
        self,
        store: Store,
        scheme: SlotScheme,
        slot: int,
        predicate: sa.ColumnElement[bool],
        same_database: bool,
        settled: set[str] | None,
        limit: int | None,
    ) -> Iterator[RecordId]:
        remaining = limit
        after: Any = None
        checked = self._slot_column is None
        while remaining is None or remaining > 0:
            size = self._chunk_size if remaining is None else min(self._chunk_size, remaining)
            page = self._page(predicate, after, size)
            # One short read per chunk, closed before the ids are handed out: nothing is held open while
            # the caller works, and an anti-join reads the ledger afresh for every chunk.
            if same_database:
                with store.reading() as connection:
                    ids = _fetch_ids(connection, page)
            else:
                with connect(self.engine, self._target) as connection:
                    ids = _fetch_ids(connection, page)
            if not ids:
                return
            if not checked:
                self._check_stored_slots(scheme, slot, ids)
                checked = True
            after = ids[-1]
            found = ids
            if settled:  # ledger keys are the ids' text: str() is record_key for int and str ids
                found = [record for record in ids if str(record) not in settled]
            if remaining is not None:
                found = found[:remaining]
                remaining -= len(found)
            yield from found
            if len(ids) < size:
                return

    def _integer_ids(self) -> bool:
        return isinstance(self.table.c[self._id_column].type, sa.Integer)

    def _fingerprint(self, predicate: sa.ColumnElement[bool]) -> Fingerprint:
        """The ``id_fingerprints`` fingerprint of the slot's ids: one aggregate in the source database."""
        query = sa.select(*fingerprint_columns(self.table.c[self._id_column])).where(predicate)
        with connect(self.engine, self._target) as connection:
            return fingerprint_of(connection.execute(query).one())

    def count(self, scheme: SlotScheme, slot: int) -> int:
        """How many rows of the table are in ``slot`` under ``scheme`` (the ledger plays no part)."""
        query = sa.select(sa.func.count()).select_from(self.table).where(self._slot_predicate(scheme, slot))
        with connect(self.engine, self._target) as connection:
            return int(connection.execute(query).scalar_one())

    def all_ids(self) -> Iterator[RecordId]:
        """Every id of the table in id order, streamed in chunks (for balance reports and migration plans)."""
        self.table  # noqa: B018 - reflect (and fail on bad names) before the first next()
        return self._all_ids()

    def _all_ids(self) -> Iterator[RecordId]:
        after: Any = None
        while True:
            with connect(self.engine, self._target) as connection:
                page = self._page(self.table.c[self._id_column].is_not(None), after, self._chunk_size)
                ids = _fetch_ids(connection, page)
            yield from ids
            if len(ids) < self._chunk_size:
                return
            after = ids[-1]
