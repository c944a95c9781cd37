"""The hot enqueue statements: work items in, as driver SQL, one text per dialect (see ``hot``).

``HotSQL`` takes these methods from ``EnqueueSQL``; they need its ``backend`` and ``_item_time``. Every
enqueue runs here: a bulk one on the transaction's SQLAlchemy connection, a small one that is a
transaction of its own on a driver cursor (``item_enqueue._enqueue_alone``); both take the same SQL.

Where the idempotency key is kept differs by backend (migration 0015): PostgreSQL's ``work_items`` has
no (kind, key) index (every claim and completion would rewrite it), so the key goes into
``work_item_keys``; SQLite's ``work_items`` kept its unique (kind, key) index (migration 0007), which
costs its updates nothing, so the item row is its own key row and an enqueue is one statement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from itertools import chain
from typing import Any

from .records import ItemState
from .url import Backend

__all__ = ["POSTGRES_ITEM_KEY_INSERT", "EnqueueRow", "EnqueueSQL"]

_PENDING = f"'{ItemState.PENDING.value}'"

#: Most ids one SQLite statement binds (old SQLite builds allow 999 parameters).
_SQLITE_IDS_PER_STATEMENT = 512

# A bulk enqueue, the items given as (kind, key, payload JSON text, max_attempts, run_after) rows or,
# for items of one kind that share their attempts and time, as (key, payload) pairs with the shared
# values bound once (a tenth faster for a bulk submit than the rows). No (kind, key) twice. The key
# goes into ``work_item_keys`` first and an existing (kind, key) is kept as it is; the item is
# inserted only for a key that was new, with the id its key row took (migration 0007). The new items
# come back as (kind, key, id).
_ENQUEUE_COLUMNS = "kind, key, payload, state, attempts, max_attempts, run_after, created_at, updated_at"
_POSTGRES_ENQUEUE_KEYS = """given AS ({given}), fresh AS (
    INSERT INTO work_item_keys (kind, key, item_id)
    SELECT given.kind, given.key, nextval('work_items_id_seq') FROM given
    ON CONFLICT DO NOTHING
    RETURNING kind, key, item_id
)"""
_POSTGRES_ENQUEUE_ITEMS = f"""INSERT INTO work_items (id, {{columns}})
SELECT fresh.item_id, fresh.kind, fresh.key, given.payload::jsonb, {_PENDING}, 0, given.max_attempts,
       given.run_after, %s, %s{{queue}}
  FROM fresh JOIN given ON given.kind = fresh.kind AND given.key = fresh.key
RETURNING kind, key, id"""
_POSTGRES_ENQUEUE = f"WITH {_POSTGRES_ENQUEUE_KEYS}\n{_POSTGRES_ENQUEUE_ITEMS}"
# The same, as one statement that also wakes idle workers (``pg_notify``, delivered at commit; one
# notification repeated in a transaction is delivered once). Run on its own in autocommit it is one
# round trip, where BEGIN, the insert, a NOTIFY and COMMIT were four: the single submit of a web
# request (benchmarks/bench_enqueue.py).
_POSTGRES_ENQUEUE_WAKE = (
    f"WITH {_POSTGRES_ENQUEUE_KEYS}, made AS (\n{_POSTGRES_ENQUEUE_ITEMS}\n)\n"
    f"SELECT made.kind, made.key, made.id, pg_notify(%s, made.kind) FROM made"
)
_POSTGRES_ENQUEUE_ROWS = _POSTGRES_ENQUEUE.format(
    columns=_ENQUEUE_COLUMNS,
    queue="",
    given="SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::int[], %s::timestamptz[])"
    " AS t (kind, key, payload, max_attempts, run_after)",
)
# The items of one kind share their queue too (the rows' items, of any kind, are in "default").
_GIVEN_KIND = (
    "SELECT %s::text AS kind, t.key, t.payload, %s::int AS max_attempts, %s::timestamptz AS run_after,"
    " %s::text AS queue FROM unnest(%b::text[], %b::text[]) AS t (key, payload)"
)
_POSTGRES_ENQUEUE_KIND = _POSTGRES_ENQUEUE.format(
    columns=_ENQUEUE_COLUMNS + ", queue", queue=", given.queue", given=_GIVEN_KIND
)
_POSTGRES_ENQUEUE_KIND_WAKE = _POSTGRES_ENQUEUE_WAKE.format(
    columns=_ENQUEUE_COLUMNS + ", queue", queue=", given.queue", given=_GIVEN_KIND
)
# SQLite: the key is the item's own unique (kind, key) index, so an existing (kind, key) is skipped by
# the insert itself and a small enqueue is one statement (a transaction of its own in autocommit).
# ``WHERE true`` tells SQLite's parser that ON CONFLICT belongs to the INSERT, not to a join.
_SQLITE_ENQUEUE = f"""
INSERT INTO work_items ({_ENQUEUE_COLUMNS}{{queue_column}})
SELECT column1, column2, column3, {_PENDING}, 0, column4, column5, ?, ?{{queue}} FROM ({{given}}) AS v WHERE true
ON CONFLICT (kind, key) DO NOTHING
RETURNING kind, key, id
"""
_SQLITE_GIVEN_ROWS = "VALUES {rows}"
_SQLITE_GIVEN_KIND = (
    "SELECT ? AS column1, column1 AS column2, column2 AS column3, ? AS column4, ? AS column5, ? AS column6"
    " FROM (VALUES {rows})"
)
#: One item row of an enqueue: (kind, key, payload JSON text, max_attempts, run_after).
EnqueueRow = tuple[str, str, str, int, datetime]
#: PostgreSQL: the key of one item inserted on its own (a stream's batch, whose key is unique by
#: construction). SQLite needs none: the item row is its key.
POSTGRES_ITEM_KEY_INSERT = "INSERT INTO work_item_keys (kind, key, item_id) VALUES (%s, %s, %s)"


# PostgreSQL, a bulk enqueue of items whose keys no item can have yet (random ones): the ids taken from
# the items' sequence in one query, then the key rows and the items each in one COPY, about twice as
# fast as the statement above (benchmarks/README.md, "fourth step"). COPY cannot skip a key that
# exists, so a conflict (a random key a caller once gave) makes it fail; ``copy_fresh`` then leaves
# the work to the statement.
_POSTGRES_TAKE_IDS = "SELECT nextval('work_items_id_seq') FROM generate_series(1, %s)"
_POSTGRES_COPY_KEYS = "COPY work_item_keys (kind, key, item_id) FROM STDIN"
_POSTGRES_COPY_ITEMS = (
    f"COPY work_items (id, {_ENQUEUE_COLUMNS}, queue) FROM STDIN"
)


#: Rows of one ``copy_fresh`` write: the server parses a slice while the next one is made.
_COPY_SLICE = 1_000


def _copy_text(value: str) -> str:
    """A value in COPY's text format. Only the backslash needs its escape here: keys refuse control
    characters (``limits.check_key``), JSON text escapes them, and kinds and queue names are ASCII names."""
    return value.replace("\\", "\\\\") if "\\" in value else value


#: Most (key, payload) pairs one SQLite enqueue statement of one kind binds.
SQLITE_PAIRS_PER_STATEMENT = _SQLITE_IDS_PER_STATEMENT // 2


@lru_cache(maxsize=64)
def _sqlite_enqueue(size: int, one_kind: bool) -> str:
    if one_kind:
        return _SQLITE_ENQUEUE.format(
            queue_column=", queue", queue=", column6", given=_SQLITE_GIVEN_KIND.format(rows=", ".join(["(?, ?)"] * size))
        )
    return _SQLITE_ENQUEUE.format(
        queue_column="", queue="", given=_SQLITE_GIVEN_ROWS.format(rows=", ".join(["(?, ?, ?, ?, ?)"] * size))
    )


def _execute(connection: Any) -> Callable[..., Any]:
    """How to run driver SQL on ``connection``: a SQLAlchemy ``Connection`` (``exec_driver_sql``) or a
    DB-API cursor (``execute``); both return something whose rows can be fetched."""
    return connection.exec_driver_sql if hasattr(connection, "exec_driver_sql") else connection.execute


class EnqueueSQL:
    """The enqueue statements of one backend (a part of ``HotSQL``)."""

    backend: Backend
    _item_time: Callable[[datetime | None], Any]

    def enqueue(self, connection: Any, rows: Sequence[EnqueueRow], now: datetime) -> list[tuple[str, str, int]]:
        """Insert ``rows`` (no (kind, key) twice) in ``connection``'s transaction; returns (kind, key,
        id) of the items that were new."""
        written = self._item_time(now)
        if self.backend is Backend.POSTGRESQL:
            columns = [list(column) for column in zip(*rows, strict=True)] if rows else [[], [], [], [], []]
            made = _execute(connection)(_POSTGRES_ENQUEUE_ROWS, (*columns, written, written)).fetchall()
            return [(made_kind, key, item_id) for made_kind, key, item_id in made]
        times: dict[datetime, Any] = {}  # items enqueued together mostly share their time
        for row in rows:
            if row[4] not in times:
                times[row[4]] = self._item_time(row[4])
        step = _SQLITE_IDS_PER_STATEMENT // 5
        return _run_sqlite_enqueue(connection, (
            (_sqlite_enqueue(len(chunk), False), (written, written, *chain.from_iterable(
                (kind, key, payload, max_attempts, times[run_after])
                for kind, key, payload, max_attempts, run_after in chunk
            )))
            for chunk in (rows[start : start + step] for start in range(0, len(rows), step))
        ))

    def enqueue_kind(
        self,
        connection: Any,
        kind: str,
        pairs: Sequence[tuple[str, str]],
        max_attempts: int,
        run_after: datetime,
        now: datetime,
        queue: str = "default",
        channel: str | None = None,
    ) -> list[tuple[str, str, int]]:
        """``enqueue`` of (key, payload JSON text) pairs of one kind sharing ``max_attempts``,
        ``run_after`` and ``queue``, bound once; on a SQLAlchemy connection or a driver cursor.

        ``channel`` (PostgreSQL): the statement also wakes idle workers on it (``pg_notify``), so a small
        enqueue run on its own in autocommit is one round trip (a single submit). SQLite has no
        notification: its idle workers see the commit (``data_version``).
        """
        written = self._item_time(now)
        shared = (kind, max_attempts, self._item_time(run_after), queue)
        execute = _execute(connection)
        if self.backend is Backend.POSTGRESQL:
            keys, payloads = (list(column) for column in zip(*pairs, strict=True)) if pairs else ([], [])
            if channel is None:
                made = execute(_POSTGRES_ENQUEUE_KIND, (*shared, keys, payloads, written, written)).fetchall()
            else:
                made = execute(
                    _POSTGRES_ENQUEUE_KIND_WAKE, (*shared, keys, payloads, written, written, channel)
                ).fetchall()
            return [(row[0], row[1], row[2]) for row in made]
        step = SQLITE_PAIRS_PER_STATEMENT
        return _run_sqlite_enqueue(connection, (
            (_sqlite_enqueue(len(chunk), True), (written, written, *shared, *chain.from_iterable(chunk)))
            for chunk in (pairs[start : start + step] for start in range(0, len(pairs), step))
        ))


    def sqlite_enqueue_statement(
        self,
        kind: str,
        pairs: Sequence[tuple[str, str]],
        max_attempts: int,
        run_after: datetime,
        now: datetime,
        queue: str = "default",
    ) -> tuple[str, tuple[Any, ...]]:
        """SQLite: ``enqueue_kind`` of up to 256 pairs as one statement and its parameters, for a small
        enqueue run on its own in autocommit (a single submit): one transaction, one driver call."""
        if len(pairs) > SQLITE_PAIRS_PER_STATEMENT:
            raise ValueError(f"one SQLite enqueue statement binds at most {SQLITE_PAIRS_PER_STATEMENT} items")
        written = self._item_time(now)
        after = written if run_after is now else self._item_time(run_after)
        return _sqlite_enqueue(len(pairs), True), (
            written, written, kind, max_attempts, after, queue, *chain.from_iterable(pairs)
        )


    def copy_fresh(
        self,
        connection: Any,
        kind: str,
        pairs: Sequence[tuple[str, str]],
        max_attempts: int,
        run_after: datetime,
        now: datetime,
        queue: str = "default",
    ) -> list[tuple[str, str, int]] | None:
        """PostgreSQL: ``enqueue_kind`` of pairs whose keys are expected to be new, by COPY, in
        ``connection``'s transaction (a SQLAlchemy connection). Every item is new, so all come back as
        (kind, key, id); None, with nothing written, when a key existed (the caller then runs
        ``enqueue_kind``, which keeps the existing item)."""
        import psycopg

        written = self._item_time(now).isoformat()
        after = written if run_after is now else self._item_time(run_after).isoformat()
        tail = f"\t{ItemState.PENDING.value}\t0\t{max_attempts}\t{after}\t{written}\t{written}\t{queue}\n"
        keys = [_copy_text(key) for key, _text in pairs]
        driver = connection.connection.driver_connection
        savepoint = connection.begin_nested()
        try:
            with driver.cursor() as cursor:
                cursor.execute(_POSTGRES_TAKE_IDS, (len(pairs),), binary=True)
                ids = [row[0] for row in cursor.fetchall()]
                # Written a slice at a time, so the server parses one slice while the next is made.
                with cursor.copy(_POSTGRES_COPY_KEYS) as copy:
                    for start in range(0, len(ids), _COPY_SLICE):
                        end = start + _COPY_SLICE
                        copy.write("".join([
                            f"{kind}\t{key}\t{item_id}\n" for key, item_id in zip(keys[start:end], ids[start:end], strict=True)
                        ]))
                with cursor.copy(_POSTGRES_COPY_ITEMS) as copy:
                    for start in range(0, len(ids), _COPY_SLICE):
                        end = start + _COPY_SLICE
                        copy.write("".join([
                            f"{item_id}\t{kind}\t{key}\t{_copy_text(text)}{tail}"
                            for key, (_key, text), item_id in zip(
                                keys[start:end], pairs[start:end], ids[start:end], strict=True
                            )
                        ]))
        except psycopg.errors.UniqueViolation:
            savepoint.rollback()
            return None
        savepoint.commit()
        return [(kind, key, item_id) for (key, _text), item_id in zip(pairs, ids, strict=True)]

def _run_sqlite_enqueue(connection: Any, statements: Iterable[tuple[str, tuple[Any, ...]]]) -> list[tuple[str, str, int]]:
    """Run SQLite enqueue statements; the (kind, key, id) of the items they made."""
    execute = _execute(connection)
    made: list[tuple[str, str, int]] = []
    for statement, parameters in statements:
        made.extend(execute(statement, parameters).fetchall())
    return made
