"""``vardiya slots index``: give a user's table a slot column and a (slot, id) index, then prove it is used.

Selecting one slot of a big table must cost in proportion to the slot, not to the table. A predicate
such as ``id % 24 = 15`` cannot use an index on ``id`` (every row has to be computed), so
``add_slot_index`` adds a column holding the scheme's slot, named by ``slot_column_name``
(``vardiya_slot_24_mod``, ``vardiya_slot_24_hash1``), and an index on (slot column, id). A slot query
then reads one contiguous range of the index, in id order, which is also the order ``SqlTableSource``
pages through.

How the column is made, by database and assign:

- **PostgreSQL**: ``ALTER TABLE t ADD COLUMN c bigint GENERATED ALWAYS AS (expr) STORED``, the floor
  modulo for ``mod`` and the MD5 form of H for ``hash`` (every function in it is immutable, as a
  generated column requires). The DDL always says STORED: PostgreSQL 18 makes a generated column
  virtual when nothing is said, and a virtual column cannot be indexed there. Adding a stored column
  rewrites the table under an ACCESS EXCLUSIVE lock: run it when a pause of the writers is acceptable.
  Afterwards ``VACUUM (ANALYZE)`` sets the visibility map (so the slot query can be an index-only scan)
  and gives the planner statistics.
- **SQLite, mod**: ``ALTER TABLE t ADD COLUMN c INTEGER GENERATED ALWAYS AS (expr) VIRTUAL``. ALTER can
  only add VIRTUAL generated columns to SQLite tables, but that costs nothing here: an index on a
  virtual generated column stores the computed values in the index, so the slot query reads them from
  the index and never recomputes them.
- **SQLite, hash**: SQLite has no MD5; H is the application function ``vardiya_slot_hash``. A generated
  column calling it would make the table unreadable for every connection that has not registered it
  (the sqlite3 shell, other programs). So the column is a plain INTEGER, filled once by an UPDATE and
  kept right by triggers AFTER INSERT and AFTER UPDATE OF (id, slot column). Reading needs nothing, but
  a connection that inserts or changes ids must have the function registered
  (``vardiya.slots.register_sqlite_functions``; vardiya's own connections do), otherwise SQLite refuses
  the write with "no such function: vardiya_slot_hash" rather than leaving a wrong slot behind.

Running it again changes nothing and reports ``created=False``. Either way it ends with the plans of the
slot query and of the plain modulo predicate (``EXPLAIN`` on PostgreSQL, ``EXPLAIN QUERY PLAN`` on
SQLite), and says whether the slot query searches the new index. Identifiers are validated against the
reflected table and quoted by the dialect's identifier preparer; expressions are built by SQLAlchemy.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement, Executable

from ..errors import ConfigurationError
from ..slots.hashing import hash_slot_sql
from ..slots.scheme import Assign, SlotScheme
from .sql_source import (
    check_id_column,
    connect,
    create_source_engine,
    parse_source_url,
    reflect_table,
    require_column,
    slot_column_name,
    slot_expression,
)

__all__ = ["SlotColumnKind", "SlotIndexReport", "add_slot_index", "index_name", "slot_column_name"]

EXAMPLE_SLOT = 15
"""The slot whose query is explained (taken modulo B), as in ``id % 24 = 15``."""

_POSTGRES_MAX_NAME = 63  # longer identifiers are cut silently, which would defeat the existence check


class SlotColumnKind(StrEnum):
    """How the slot column gets its values."""

    STORED = "stored generated"  # PostgreSQL
    VIRTUAL = "virtual generated"  # SQLite, mod: the values live in the index
    TRIGGERS = "filled by triggers"  # SQLite, hash


@dataclass(frozen=True, kw_only=True)
class SlotIndexReport:
    """What ``add_slot_index`` found or made, and the plans that show whether the index is used."""

    table: str
    column: str
    index: str
    kind: SlotColumnKind
    created: bool
    query: str
    plan: list[str]
    uses_index: bool
    plain_query: str
    plain_plan: list[str]
    plain_uses_index: bool

    def to_json(self) -> dict[str, Any]:
        """The document of ``vardiya slots index --json``."""
        document = asdict(self)
        document["kind"] = self.kind.value
        return document


def index_name(table: str, column: str) -> str:
    """``ix_<table>_<column>``, shortened with a digest when PostgreSQL would cut it."""
    name = f"ix_{table}_{column}"
    if len(name) <= _POSTGRES_MAX_NAME:
        return name
    digest = hashlib.md5(name.encode("utf-8"), usedforsecurity=False).hexdigest()[:8]
    return f"{name[: _POSTGRES_MAX_NAME - 9]}_{digest}"


class _Explain(Executable, ClauseElement):
    """``EXPLAIN`` (PostgreSQL) or ``EXPLAIN QUERY PLAN`` (SQLite) of a SELECT built with SQLAlchemy."""

    inherit_cache = False

    def __init__(self, query: sa.Select[Any]) -> None:
        self.query = query


@compiles(_Explain)
def _compile_explain(element: _Explain, compiler: SQLCompiler, **kw: Any) -> str:
    prefix = "EXPLAIN QUERY PLAN " if compiler.dialect.name == "sqlite" else "EXPLAIN "
    return prefix + compiler.process(element.query, **kw)


def _explain(connection: sa.Connection, query: sa.Select[Any]) -> list[str]:
    rows = connection.execute(_Explain(query)).all()
    if connection.dialect.name == "sqlite":
        return [str(row[-1]) for row in rows]  # (id, parent, notused, detail)
    return [str(row[0]) for row in rows]


def _shown(query: sa.Select[Any], dialect: Dialect) -> str:
    text = str(query.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
    if dialect.paramstyle in ("format", "pyformat"):
        text = text.replace("%%", "%")
    return " ".join(text.split())


def _searches_index(plan: list[str], dialect_name: str, index: str, column: str) -> bool:
    """Whether the plan looks rows up through ``index`` by ``column`` (a full scan of it does not count)."""
    if dialect_name == "sqlite":
        pattern = re.compile(rf"^SEARCH .* USING (COVERING )?INDEX {re.escape(index)} \({re.escape(column)}=")
        return any(pattern.search(line) for line in plan)
    names = "|".join(re.escape(name) for name in {index, f'"{index}"'})
    scan = re.compile(
        rf"(Index Only Scan|Index Scan)( Backward)? using ({names}) |Bitmap Index Scan on ({names})\b"
    )
    condition = re.compile(rf"(Index Cond|Recheck Cond): .*\b{re.escape(column)}\b")
    text = "\n".join(plan)
    return bool(scan.search(text) and condition.search(text))


class _SlotColumnBuilder:
    """The DDL for one (table, scheme) on one connection; every name here was checked by reflection."""

    def __init__(
        self, connection: sa.Connection, table: sa.Table, id_column: str, scheme: SlotScheme
    ) -> None:
        self.connection = connection
        self.dialect = connection.dialect
        self.quote = self.dialect.identifier_preparer.quote
        self.table = table
        self.id_column = id_column
        self.scheme = scheme
        self.column = slot_column_name(scheme)
        self.index = index_name(table.name, self.column)
        if self.dialect.name != "sqlite":
            self.kind = SlotColumnKind.STORED
        elif scheme.assign is Assign.HASH:
            self.kind = SlotColumnKind.TRIGGERS
        else:
            self.kind = SlotColumnKind.VIRTUAL

    # -- names and expressions ------------------------------------------------------------------------

    def qualified(self, name: str) -> str:
        schema = self.table.schema
        preparer = self.dialect.identifier_preparer
        return f"{preparer.quote_schema(schema)}.{self.quote(name)}" if schema else self.quote(name)

    def _sql(self, expression: sa.ColumnElement[Any]) -> str:
        compiled = expression.compile(dialect=self.dialect, compile_kwargs={"literal_binds": True})
        return str(compiled)

    def _slot_of(self, id_sql: sa.ColumnElement[Any]) -> str:
        return self._sql(slot_expression(id_sql, self.scheme, self.dialect.name))

    def _slot_table(self) -> sa.TableClause:
        """The table with just its id and slot columns, for statements about the column being made."""
        columns: tuple[sa.ColumnClause[Any], ...] = (sa.column(self.id_column), sa.column(self.column))
        return sa.table(self.table.name, *columns, schema=self.table.schema)

    # -- what exists --------------------------------------------------------------------------------

    def _existing_indexes(self) -> set[str]:
        indexes = sa.inspect(self.connection).get_indexes(self.table.name, schema=self.table.schema)
        return {str(found["name"]) for found in indexes}

    def _trigger_names(self) -> tuple[str, str]:
        return f"{self.column}_{self.table.name}_insert", f"{self.column}_{self.table.name}_update"

    def _existing_triggers(self) -> set[str]:
        columns: tuple[sa.ColumnClause[Any], ...] = (sa.column("type"), sa.column("name"), sa.column("tbl_name"))
        master = sa.table("sqlite_master", *columns, schema=self.table.schema)
        query = sa.select(master.c.name).where(
            master.c.type == "trigger", master.c.tbl_name == self.table.name
        )
        return set(self.connection.execute(query).scalars())

    def _has_rowid(self) -> bool:
        probe: sa.Select[Any] = sa.select(sa.literal_column("rowid")).select_from(self.table).limit(0)
        try:
            with self.connection.begin_nested():
                self.connection.execute(probe)
        except sa.exc.OperationalError:
            return False  # a WITHOUT ROWID table
        return True

    # -- making it ----------------------------------------------------------------------------------

    def ensure(self) -> bool:
        """Add whatever is missing of column, triggers and index; True when anything was added."""
        created = False
        if self.column in self.table.c:
            self._check_existing_column()
        else:
            self._add_column()
            created = True
        if self.kind is SlotColumnKind.TRIGGERS:
            created = self._ensure_triggers(fill_all=created) or created
        if self.index not in self._existing_indexes():
            table = reflect_table(self.connection, self.table.name, self.table.schema, "the source database")
            sa.Index(self.index, table.c[self.column], table.c[self.id_column]).create(self.connection)
            created = True
        return created

    def _check_existing_column(self) -> None:
        if self.kind is not SlotColumnKind.TRIGGERS and self.table.c[self.column].computed is None:
            raise ConfigurationError(
                f"column {self.table.name}.{self.column} exists but is not a generated column, so its "
                "slots cannot be trusted; drop it and run `vardiya slots index` again"
            )

    def _add_column(self) -> None:
        table, column = self.qualified(self.table.name), self.quote(self.column)
        expression = self._slot_of(sa.column(self.id_column))
        if self.kind is SlotColumnKind.STORED:  # STORED said out loud: PostgreSQL 18 defaults to VIRTUAL
            definition = f"BIGINT GENERATED ALWAYS AS ({expression}) STORED"
        elif self.kind is SlotColumnKind.VIRTUAL:  # the only generated kind SQLite's ALTER can add
            definition = f"INTEGER GENERATED ALWAYS AS ({expression}) VIRTUAL"
        else:
            definition = "INTEGER"
        self.connection.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")

    def _ensure_triggers(self, *, fill_all: bool) -> bool:
        """SQLite hash: the triggers that keep the plain column right, and the UPDATE that fills it."""
        missing = [name for name in self._trigger_names() if name not in self._existing_triggers()]
        if not missing and not fill_all:
            return False
        table = self.quote(self.table.name)  # a trigger body may not qualify the table it changes
        column, record_id = self.quote(self.column), self.quote(self.id_column)
        new_slot = self._slot_of(sa.literal_column(f"NEW.{record_id}"))
        where = "rowid = NEW.rowid" if self._has_rowid() else f"{record_id} IS NEW.{record_id}"
        body = (
            f"FOR EACH ROW WHEN NEW.{column} IS NOT {new_slot} "
            f"BEGIN UPDATE {table} SET {column} = {new_slot} WHERE {where}; END"
        )
        events = dict(zip(self._trigger_names(), ("INSERT", f"UPDATE OF {record_id}, {column}"), strict=True))
        for name in missing:
            self.connection.exec_driver_sql(
                f"CREATE TRIGGER {self.qualified(name)} AFTER {events[name]} ON {table} {body}"
            )
        target = self._slot_table()
        slot = hash_slot_sql(target.c[self.id_column], self.scheme.slots, "sqlite")
        fill = sa.update(target).values({target.c[self.column]: slot})
        if not fill_all:
            fill = fill.where(target.c[self.column].is_distinct_from(slot))  # rows written while unguarded
        self.connection.execute(fill)
        return True

    # -- proving it -----------------------------------------------------------------------------------

    def queries(self) -> tuple[sa.Select[Any], sa.Select[Any]]:
        """The slot query and the plain predicate it replaces (``id % B = slot``), values inline."""
        target = self._slot_table()
        slot = EXAMPLE_SLOT % self.scheme.slots
        record_id = target.c[self.id_column]
        by_column = sa.select(record_id).where(target.c[self.column] == sa.literal_column(str(slot)))
        if isinstance(self.table.c[self.id_column].type, sa.Integer):
            computed = record_id % sa.literal_column(str(self.scheme.slots))
        else:  # text ids have no modulo: the plain form is H computed in the query
            computed = slot_expression(record_id, self.scheme, self.dialect.name)
        plain = sa.select(record_id).where(computed == sa.literal_column(str(slot)))
        return by_column, plain


def add_slot_index(
    url: str, table: str, *, id_column: str = "id", scheme: SlotScheme, schema: str | None = None
) -> SlotIndexReport:
    """Give ``table`` the scheme's slot column and a (slot, id) index if missing; explain the slot query.

    See the module docstring for what is created on each database. Unknown table or column names are a
    ``ConfigurationError`` that lists what exists.
    """
    target = parse_source_url(url)
    engine = create_source_engine(target)
    try:
        with connect(engine, target) as connection, connection.begin():
            reflected = reflect_table(connection, table, schema, target.display)
            check_id_column(require_column(reflected, id_column, "id_column"), scheme)
            builder = _SlotColumnBuilder(connection, reflected, id_column, scheme)
            created = builder.ensure()
        if engine.dialect.name == "postgresql":
            maintenance = "VACUUM (ANALYZE)" if created else "ANALYZE"
            with connect(engine, target, autocommit=True) as connection:
                connection.exec_driver_sql(f"{maintenance} {builder.qualified(table)}")
        by_column, plain = builder.queries()
        with connect(engine, target) as connection:
            plan, plain_plan = _explain(connection, by_column), _explain(connection, plain)
        dialect = engine.dialect
        return SlotIndexReport(
            table=table,
            column=builder.column,
            index=builder.index,
            kind=builder.kind,
            created=created,
            query=_shown(by_column, dialect),
            plan=plan,
            uses_index=_searches_index(plan, dialect.name, builder.index, builder.column),
            plain_query=_shown(plain, dialect),
            plain_plan=plain_plan,
            plain_uses_index=_searches_index(plain_plan, dialect.name, builder.index, builder.column),
        )
    finally:
        engine.dispose()
