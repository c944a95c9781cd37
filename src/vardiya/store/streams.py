"""The store-backed stream: append records, cut them into batch work items, keep order per lane.

A stream is named after its handler. ``append`` stores records in ``stream_records``; their ids are the
stream's offsets, so order is append order. ``cut`` moves waiting records into batch work items of kind
``batch:NAME`` (up to ``batch_size`` records each, in offset order) in the same transaction that
deletes them from the stream, so a record is in exactly one place at any time: waiting in the stream,
or owned by one batch item (which retries it and, at the end, dead-letters it).

Order per key: an ordered stream spreads keys over lanes (a stable hash of the key); a lane is cut one
batch at a time, the next only once the previous batch has finished (succeeded or dead), so two
records of one key are never processed out of order, retries included. An unordered stream has one
lane and any number of batches in flight.

A partial batch is cut once its oldest record has waited ``window_s`` (0: at once).

This is the interface a broker adapter (Redis Streams, NATS JetStream, Kafka) would implement: append
with an optional key, offsets in order, batches cut per lane; the consumer above it does not change.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa

from ..limits import check_key, check_kind, check_name
from ..rules.batching import batch_ready
from .backend import times_of
from .hot_enqueue import POSTGRES_ITEM_KEY_INSERT
from .records import ItemState
from .schema import stream_lanes, stream_records, work_items
from .sqlite import SQLITE_TIMES
from .types import dumps_json, json_text
from .url import Backend

if TYPE_CHECKING:
    from .api import Store

__all__ = ["NOTIFY_CHANNEL", "Streams", "batch_ready", "epoch_ms", "lane_of"]

#: The PostgreSQL channel every enqueue and append notifies; idle workers LISTEN on it.
NOTIFY_CHANNEL = "vardiya_work"

_FINISHED = (ItemState.SUCCEEDED.value, ItemState.DEAD.value)
_INSERT_BATCH = work_items.insert().returning(work_items.c.id)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch_ms(moment: datetime) -> int:
    """Milliseconds since the epoch (what batch payloads carry as a record's arrival time)."""
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def lane_of(key: str | None, lanes: int) -> int:
    """The lane of a key: a stable hash (BLAKE2b), the same in every process and every release."""
    if key is None or lanes == 1:
        return 0
    digest = hashlib.blake2b(key.encode(), digest_size=8, person=b"vardiya-lane").digest()
    return int.from_bytes(digest, "big") % lanes


def _check_record(stream: str, record: Any) -> str:
    return json_text(record, f"a record appended to stream {stream!r}")


# An append as driver SQL (SQLAlchemy's executemany with RETURNING cost more than the database): the
# stream and the time bound once, the rows as arrays (PostgreSQL) or VALUES (SQLite). The ids are the
# offsets; rows go in in the given order, and the returned ids are sorted, so the offsets are in order
# whatever order RETURNING gives them in.
_POSTGRES_APPEND = """
INSERT INTO stream_records (stream, lane, key, payload, appended_at)
SELECT %s, t.lane, t.key, t.payload::jsonb, %s
  FROM unnest(%b::int[], %b::text[], %b::text[]) WITH ORDINALITY AS t (lane, key, payload, n)
 ORDER BY t.n
RETURNING id
"""
_SQLITE_APPEND = (
    "INSERT INTO stream_records (stream, lane, key, payload, appended_at)"
    " SELECT ?, column1, column2, column3, ? FROM (VALUES {rows}) RETURNING id"
)
#: Rows per SQLite statement: three parameters each, under the 999 that old SQLite builds allow.
_SQLITE_APPEND_ROWS = 300


def _append_rows(
    connection: sa.Connection,
    backend: Backend,
    stream: str,
    appended_at: Any,
    lanes: list[int],
    keys: list[str | None],
    texts: list[str],
) -> list[int]:
    if backend is Backend.POSTGRESQL:
        rows = connection.exec_driver_sql(_POSTGRES_APPEND, (stream, appended_at, lanes, keys, texts)).fetchall()
        return sorted(row[0] for row in rows)
    ids: list[int] = []
    for start in range(0, len(texts), _SQLITE_APPEND_ROWS):
        chunk = list(zip(lanes[start : start + _SQLITE_APPEND_ROWS], keys[start : start + _SQLITE_APPEND_ROWS],
                         texts[start : start + _SQLITE_APPEND_ROWS], strict=True))
        statement = _SQLITE_APPEND.format(rows=", ".join(["(?, ?, ?)"] * len(chunk)))
        parameters = (stream, appended_at, *(value for row in chunk for value in row))
        ids.extend(sorted(row[0] for row in connection.exec_driver_sql(statement, parameters).fetchall()))
    return ids


def notify(connection: sa.Connection, backend: Backend, kind: str) -> None:
    """Wake idle workers (PostgreSQL NOTIFY, delivered at commit); nothing to do on SQLite."""
    if backend is Backend.POSTGRESQL:
        connection.execute(sa.select(sa.func.pg_notify(NOTIFY_CHANNEL, kind)))


class Streams:
    """Stream operations of one store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def append_many(
        self,
        stream: str,
        records: Sequence[tuple[str | None, Any]],
        *,
        lanes: int = 1,
        kind: str | None = None,
        chunk_size: int = 2_000,
    ) -> list[int]:
        """Append (key, record) pairs in order; returns their offsets. Every record is checked first."""
        check_name(stream, "a stream name")
        if kind is not None:
            check_kind(kind)
        texts = []
        for key, record in records:
            texts.append(_check_record(stream, record))  # the JSON text the row keeps: encoded once
            if key is not None:
                check_key(key, "a stream's order key")
        backend = self._store.backend
        appended_at = times_of(backend).time(self._store.clock.now())
        lanes_of = [lane_of(key, lanes) for key, _record in records]
        keys = [key for key, _record in records]
        offsets: list[int] = []
        for start in range(0, len(records), chunk_size):
            end = start + chunk_size
            with self._store.transaction() as connection:
                offsets.extend(_append_rows(
                    connection, backend, stream, appended_at, lanes_of[start:end], keys[start:end], texts[start:end]
                ))
                notify(connection, backend, kind or stream)
        return offsets

    def waiting(self, stream: str) -> int:
        """How many records wait in the stream (not yet cut into batches)."""
        with self._store.reading() as connection:
            return connection.execute(
                sa.select(sa.func.count()).select_from(stream_records).where(stream_records.c.stream == stream)
            ).scalar_one()

    def cut(
        self,
        stream: str,
        *,
        kind: str,
        batch_size: int,
        window_s: float,
        max_attempts: int,
        ordered: bool,
        lanes: int,
        max_batches: int = 50,
        flush: bool = False,
        queue: str = "default",
    ) -> int:
        """Cut waiting records into batch items; returns how many batches were made.

        ``flush`` cuts partial batches without waiting for the window (a worker draining to idle).
        ``queue``: the named queue of the batch items (the stream handler's).
        """
        now = self._store.clock.now()
        made = 0
        cut_ids: list[int] = []
        with self._store.transaction() as connection:
            for lane in range(lanes if ordered else 1):
                while made < max_batches:
                    if ordered and not self._lane_free(connection, stream, lane):
                        break
                    item_id = self._cut_one(
                        connection, stream, lane, kind, batch_size, window_s, max_attempts, now, flush
                    )
                    if item_id is None:
                        break
                    made += 1
                    cut_ids.append(item_id)
                    if ordered:
                        connection.execute(
                            sa.update(stream_lanes)
                            .where(stream_lanes.c.stream == stream, stream_lanes.c.lane == lane)
                            .values(open_item=item_id)
                        )
                        break  # one batch of a lane in flight at a time
            if cut_ids and queue != "default":
                connection.execute(sa.update(work_items).where(work_items.c.id.in_(cut_ids)).values(queue=queue))
            if made:
                notify(connection, self._store.backend, kind)
        return made

    def _lane_free(self, connection: sa.Connection, stream: str, lane: int) -> bool:
        """Lock the lane's row (creating it) and tell whether its batch in flight has finished."""
        lanes_c = stream_lanes.c
        insert = self._store.dialect_insert(stream_lanes).values(
            stream=stream, lane=lane, open_item=None, cut_through=0
        ).on_conflict_do_nothing(index_elements=["stream", "lane"])
        connection.execute(insert)
        query = sa.select(lanes_c.open_item).where(lanes_c.stream == stream, lanes_c.lane == lane)
        if self._store.backend is Backend.POSTGRESQL:
            query = query.with_for_update()
        open_item = connection.execute(query).scalar_one()
        if open_item is None:
            return True
        state = connection.execute(sa.select(work_items.c.state).where(work_items.c.id == open_item)).scalar()
        return state is None or state in _FINISHED

    def _cut_one(
        self,
        connection: sa.Connection,
        stream: str,
        lane: int,
        kind: str,
        batch_size: int,
        window_s: float,
        max_attempts: int,
        now: datetime,
        flush: bool,
    ) -> int | None:
        if self._store.backend is Backend.SQLITE:
            return self._cut_one_sqlite(connection, stream, lane, kind, batch_size, window_s, max_attempts, now, flush)
        s = stream_records.c
        query = (
            sa.select(s.id, s.key, s.payload, s.appended_at)
            .where(s.stream == stream, s.lane == lane)
            .order_by(s.id)
            .limit(batch_size)
        )
        query = query.with_for_update(skip_locked=True)
        rows = connection.execute(query).all()
        if not rows:
            return None
        if not batch_ready(len(rows), batch_size, rows[0].appended_at, now, window_s, flush=flush):
            return None  # a partial batch waits for more records, up to the window
        arrived: dict[datetime, int] = {}  # records appended together share their time: convert it once
        records = []
        for row in rows:
            arrived_ms = arrived.get(row.appended_at)
            if arrived_ms is None:
                arrived_ms = arrived[row.appended_at] = epoch_ms(row.appended_at)
            records.append([row.id, row.key, row.payload, arrived_ms, 0, None])
        # Bound parameters on fixed statements: building them with .values() and .in_() cost more than
        # the database work (benchmarks/README.md, bench_stream).
        batch_key = f"{lane}:{rows[0].id}"
        item_id = connection.execute(
            _INSERT_BATCH,
            {
                "kind": kind,
                "key": batch_key,
                "payload": {"lane": lane, "size": len(records), "records": records},
                "state": ItemState.PENDING,
                "attempts": 0,
                "max_attempts": max_attempts,
                "run_after": now,
                "created_at": now,
                "updated_at": now,
            },
        ).scalar_one()
        connection.exec_driver_sql(POSTGRES_ITEM_KEY_INSERT, (kind, batch_key, item_id))
        ids = [row.id for row in rows]
        connection.exec_driver_sql("DELETE FROM stream_records WHERE id = ANY(%s)", (ids,))
        connection.execute(
            sa.update(stream_lanes)
            .where(stream_lanes.c.stream == stream, stream_lanes.c.lane == lane)
            .values(cut_through=ids[-1])
        )
        return item_id

    def _cut_one_sqlite(
        self,
        connection: sa.Connection,
        stream: str,
        lane: int,
        kind: str,
        batch_size: int,
        window_s: float,
        max_attempts: int,
        now: datetime,
        flush: bool,
    ) -> int | None:
        """``_cut_one`` as driver SQL, the records' payloads kept as the JSON text they are stored as.

        The batch document is joined from the stored texts (written by ``dumps_json``, so the result is
        the text ``dumps_json`` would make of the decoded document), and the records leave the stream by
        id range: the cut runs inside ``BEGIN IMMEDIATE``, so no other writer can add a record of this
        lane between the first and the last id read. Decoding and re-encoding every record through
        SQLAlchemy's JSON and time types was most of a stream's consumption (benchmarks/README.md).
        """
        # the sqlite3 connection itself, inside the transaction SQLAlchemy opened on it: a statement
        # through exec_driver_sql cost more in SQLAlchemy's result set-up than in SQLite
        raw = cast(sqlite3.Connection, connection.connection.driver_connection)  # never None on a live connection
        rows = raw.execute(_SQLITE_CUT_SELECT, (stream, lane, batch_size)).fetchall()
        if not rows:
            return None
        if not batch_ready(
            len(rows), batch_size, _read_time(rows[0][3]), now, window_s, flush=flush
        ):
            return None  # a partial batch waits for more records, up to the window
        arrived: dict[str, int] = {}  # records appended together share their time: convert it once
        parts = []
        for record_id, key, payload, appended_at in rows:
            if payload.__class__ is not str:  # a number: the JSON column's NUMERIC affinity stored it so
                payload = dumps_json(payload)
            arrived_ms = arrived.get(appended_at)
            if arrived_ms is None:
                arrived_ms = arrived[appended_at] = epoch_ms(_read_time(appended_at))
            parts.append(
                f"[{record_id},{'null' if key is None else dumps_json(key)},{payload},{arrived_ms},0,null]"
            )
        first, last = rows[0][0], rows[-1][0]
        document = f'{{"lane":{lane},"size":{len(rows)},"records":[{",".join(parts)}]}}'
        t_now = SQLITE_TIMES.item_time(now)
        batch_key = f"{lane}:{first}"
        (item_id,) = raw.execute(
            _SQLITE_CUT_INSERT,
            (kind, batch_key, document, ItemState.PENDING.value, 0, max_attempts, t_now, t_now, t_now),
        ).fetchone()
        raw.execute(_SQLITE_CUT_DELETE, (stream, lane, first, last))
        raw.execute(_SQLITE_CUT_THROUGH, (last, stream, lane))
        return item_id

    def any_waiting(self, streams: Sequence[str]) -> bool:
        """Whether any of ``streams`` has records appended and not yet cut into a batch."""
        r = stream_records.c
        with self._store.reading() as connection:
            return connection.execute(sa.select(r.id).where(r.stream.in_(list(streams))).limit(1)).first() is not None


_SQLITE_CUT_SELECT = (
    "SELECT id, key, payload, appended_at FROM stream_records WHERE stream = ? AND lane = ? ORDER BY id LIMIT ?"
)
_SQLITE_CUT_INSERT = (
    "INSERT INTO work_items (kind, key, payload, state, attempts, max_attempts, run_after, created_at, updated_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
)
_SQLITE_CUT_DELETE = "DELETE FROM stream_records WHERE stream = ? AND lane = ? AND id BETWEEN ? AND ?"
_SQLITE_CUT_THROUGH = "UPDATE stream_lanes SET cut_through = ? WHERE stream = ? AND lane = ?"


def _read_time(text: str) -> datetime:
    """A UTCDateTime column's SQLite text as the aware datetime the column type would return."""
    moment = SQLITE_TIMES.read_time(text)
    assert moment is not None, "stream_records.appended_at is NOT NULL"
    return moment
