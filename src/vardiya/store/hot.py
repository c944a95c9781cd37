"""The hot statements: claim, complete and ledger marks, written once per dialect and run as driver SQL.

Everything else in the store goes through SQLAlchemy Core. These three run for every work item or
record, and there SQLAlchemy's per-call statement building, parameter processing and type coercion cost
more than the database work itself (profiles in benchmarks/README.md). So they are fixed SQL texts with
bound parameters only — no value is ever formatted into them — and their values are converted here
exactly as the column types in ``types.py`` would convert them.

SQLite reads the ready rows through ``INDEXED BY ix_work_items_ready``: without it the planner picks
another index and sorts every ready row on each claim, and if the partial index ever stopped matching,
SQLite would fail loudly ("no query solution") instead of quietly getting slow.

On SQLite a claim is a SELECT of the ready rows followed by an UPDATE of those ids, both inside the
claim's ``BEGIN IMMEDIATE`` (no other writer can come between them), and a completion is an UPDATE
whose row count is checked, with ``RETURNING`` only when some item was no longer held. ``RETURNING``
gathers its rows in a temporary table before it hands them out: for the claim benchmark's 20,000 items
the SQLite and driver work of an ``UPDATE ... RETURNING`` claim and a ``RETURNING`` completion is
1,093 M instructions (counted under valgrind), and 845 M this way (the raw loop's: 445 M). The id lists
are bound as ``IN (?, ...)`` padded to a power of two, so few statement texts fill the driver's cache.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any

from ..clock import ensure_aware
from .records import ItemState, WorkItem, new_work_item_parts, record_key, work_item
from .url import Backend

__all__ = ["HotSQL", "hot_sql"]

_CLAIMED_COLUMNS = "id, kind, key, payload, attempts, max_attempts, run_after, created_at, last_error"

_SQLITE_READY = f"""
SELECT {_CLAIMED_COLUMNS} FROM work_items INDEXED BY ix_work_items_ready
 WHERE state IN ('pending', 'failed') AND run_after <= ?{{kinds}}
 ORDER BY run_after, id LIMIT ?
"""

_SQLITE_TAKE = """
UPDATE work_items
   SET state = 'running', lease_owner = ?, lease_until = ?, claimed_at = ?, attempts = attempts + 1,
       updated_at = ?
 WHERE id IN ({marks})
"""

# The columns of _CLAIMED_COLUMNS; the payload comes back as text, decoded when the WorkItem's payload
# is first read.
_POSTGRES_CLAIM = """
WITH picked AS (
    SELECT id FROM work_items
     WHERE state IN ('pending', 'failed') AND run_after <= %s{kinds}
     ORDER BY run_after, id LIMIT %s
       FOR UPDATE SKIP LOCKED
)
UPDATE work_items AS w
   SET state = 'running', lease_owner = %s, lease_until = %s, claimed_at = %s, attempts = w.attempts + 1,
       updated_at = %s
  FROM picked
 WHERE w.id = picked.id
RETURNING w.id, w.kind, w.key, w.payload::text, w.attempts, w.max_attempts, w.run_after, w.created_at,
          w.last_error
"""

_SQLITE_COMPLETE = """
UPDATE work_items SET state = 'succeeded', lease_until = NULL, updated_at = ?
 WHERE id IN ({marks}) AND state = 'running' AND lease_owner = ?{returning}
"""

_POSTGRES_COMPLETE = """
UPDATE work_items SET state = 'succeeded', lease_until = NULL, updated_at = %s
 WHERE id = ANY(%s) AND state = 'running' AND lease_owner = %s
RETURNING id
"""

#: Most ids one SQLite statement binds (old SQLite builds allow 999 parameters).
_SQLITE_IDS_PER_STATEMENT = 512


def _id_chunks(ids: Sequence[int]) -> Iterator[tuple[int, tuple[int, ...]]]:
    """``ids`` in chunks for ``IN (?, ...)``, each padded (with its last id) to a power-of-two size."""
    for start in range(0, len(ids), _SQLITE_IDS_PER_STATEMENT):
        chunk = tuple(ids[start : start + _SQLITE_IDS_PER_STATEMENT])
        size = 1 << (len(chunk) - 1).bit_length()
        yield size, chunk + (chunk[-1],) * (size - len(chunk))


def _marks(size: int) -> str:
    return ", ".join(["?"] * size)


_LEDGER_COLUMNS = (
    "job", "period", "record", "slot", "status", "attempts", "first_attempt_at", "last_attempt_at",
    "duration_ms", "rows", "bytes", "error",
)

# ``done`` is sticky: a later failed mark of a done record changes nothing but the attempt count.
_LEDGER_UPSERT = """
INSERT INTO ledger ({columns}) VALUES ({marks})
ON CONFLICT (job, period, record) DO UPDATE SET
    status = CASE WHEN ledger.status = 'done' THEN ledger.status ELSE excluded.status END,
    attempts = ledger.attempts + excluded.attempts,
    first_attempt_at = COALESCE(ledger.first_attempt_at, excluded.first_attempt_at),
    last_attempt_at = excluded.last_attempt_at,
    duration_ms = CASE WHEN ledger.status = 'done' THEN ledger.duration_ms ELSE excluded.duration_ms END,
    rows = CASE WHEN ledger.status = 'done' THEN ledger.rows ELSE excluded.rows END,
    bytes = CASE WHEN ledger.status = 'done' THEN ledger.bytes ELSE excluded.bytes END,
    error = CASE WHEN ledger.status = 'done' THEN ledger.error ELSE excluded.error END,
    slot = COALESCE(excluded.slot, ledger.slot)
"""


def _sqlite_time(moment: datetime | None) -> str | None:
    """UTC text in SQLAlchemy's SQLite DATETIME format, which sorts and compares as time."""
    if moment is None:
        return None
    utc = ensure_aware(moment, "timestamp")
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d} "
        f"{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}.{utc.microsecond:06d}"
    )


def _sqlite_read_time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def _postgres_time(moment: datetime | None) -> datetime | None:
    return None if moment is None else ensure_aware(moment, "timestamp")


class HotSQL:
    """The hot statements of one backend, with the conversions their values need."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        sqlite = backend is Backend.SQLITE
        self._time = _sqlite_time if sqlite else _postgres_time
        marks = ", ".join(["?" if sqlite else "%s"] * len(_LEDGER_COLUMNS))
        self.ledger_upsert = _LEDGER_UPSERT.format(columns=", ".join(_LEDGER_COLUMNS), marks=marks)
        claim = _SQLITE_READY if sqlite else _POSTGRES_CLAIM
        self._claim_any = claim.format(kinds="")
        self._claim_kinds = claim.format(
            kinds=" AND kind IN (SELECT value FROM json_each(?))" if sqlite else " AND kind = ANY(%s)"
        )
        sizes = _id_list_sizes() if sqlite else []
        self._take = {size: _SQLITE_TAKE.format(marks=_marks(size)) for size in sizes}
        self._complete = {
            (size, returning): _SQLITE_COMPLETE.format(
                marks=_marks(size), returning="\nRETURNING id" if returning else ""
            )
            for size in sizes
            for returning in (False, True)
        }

    def time(self, moment: datetime | None) -> Any:
        """A timestamp as the driver takes it for a UTCDateTime column."""
        return self._time(moment)

    def claim(
        self, n: int, kinds: Sequence[str] | None, owner: str, now: datetime, until: datetime
    ) -> tuple[str, tuple[Any, ...]]:
        """The PostgreSQL claim statement and its parameters (SQLite claims with ``sqlite_claim``)."""
        t_now, t_until = self._time(now), self._time(until)
        ready = (t_now, list(kinds), n) if kinds else (t_now, n)
        return (self._claim_kinds if kinds else self._claim_any), (*ready, owner, t_until, t_now, t_now)

    def claimed(self, rows: Sequence[Any], owner: str, now: datetime, until: datetime) -> list[WorkItem]:
        """WorkItems from the PostgreSQL claim's rows, oldest ``run_after`` first.

        What the claim itself set is filled in, not read back.
        """
        items = [
            work_item(
                (item_id, kind, key, None, ItemState.RUNNING, attempts, max_attempts, run_after, owner, until,
                 last_error, None, created_at, now),
                payload,
            )
            for item_id, kind, key, payload, attempts, max_attempts, run_after, created_at, last_error in rows
        ]
        items.sort(key=_run_after_and_id)
        return items

    def sqlite_claim(
        self,
        connection: sqlite3.Connection,
        n: int,
        kinds: Sequence[str] | None,
        owner: str,
        now: datetime,
        until: datetime,
    ) -> list[WorkItem]:
        """Claim on the driver connection, inside its open ``BEGIN IMMEDIATE`` transaction."""
        t_now = _sqlite_time(now)
        ready = (t_now, json.dumps(list(kinds)), n) if kinds else (t_now, n)
        rows = connection.execute(self._claim_kinds if kinds else self._claim_any, ready).fetchall()
        if not rows:
            return []
        claimed = (owner, _sqlite_time(until), t_now, t_now)
        for size, chunk in _id_chunks([row[0] for row in rows]):
            connection.execute(self._take[size], claimed + chunk)
        return _sqlite_claimed(rows, owner, now, until)

    def complete_statements(
        self, ids: Collection[int], owner: str, now: datetime, *, returning: bool = True
    ) -> list[tuple[str, tuple[Any, ...]]]:
        """The statements (with parameters) that mark the held ``ids`` succeeded.

        With ``returning`` each returns the ids it changed; without (SQLite only), count the changed rows.
        """
        if self.backend is Backend.POSTGRESQL:
            return [(_POSTGRES_COMPLETE, (self._time(now), list(ids), owner))]
        t_now = _sqlite_time(now)
        return [
            (self._complete[size, returning], (t_now, *chunk, owner)) for size, chunk in _id_chunks(list(ids))
        ]

    def ledger_rows(self, job: str, period: str, entries: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Ledger rows as the upsert's parameters, sorted by record.

        Records of one batch share their start and end times, so each distinct time is converted once.
        """
        converted: dict[datetime | None, Any] = {None: None}
        convert = self._time
        rows = []
        for entry in entries:
            started, finished = entry.started_at, entry.finished_at
            first = converted.get(started)
            if first is None and started is not None:
                first = converted[started] = convert(started)
            if finished is None:
                last = first
            else:
                last = converted.get(finished)
                if last is None:
                    last = converted[finished] = convert(finished)
            rows.append((
                job, period, record_key(entry.record), entry.slot, entry.status.value, entry.attempts,
                first, last, entry.duration_ms, entry.rows, entry.bytes, entry.error,
            ))
        # Upsert in key order: concurrent marks of overlapping records then take their row locks in
        # one order, so they wait for each other instead of deadlocking on PostgreSQL.
        rows.sort(key=_record_of)
        return rows


def _record_of(row: tuple[Any, ...]) -> Any:
    return row[2]


def _id_list_sizes() -> list[int]:
    """The sizes ``_id_chunks`` pads to: 1, 2, 4, ... up to ``_SQLITE_IDS_PER_STATEMENT``."""
    return [1 << power for power in range(_SQLITE_IDS_PER_STATEMENT.bit_length())]


def _run_after_and_id(item: WorkItem) -> tuple[datetime, int]:
    return item.run_after, item.id


def _sqlite_claimed(rows: Sequence[Any], owner: str, now: datetime, until: datetime) -> list[WorkItem]:
    """WorkItems from the SQLite ready rows (already in claim order), as the claim's UPDATE left them."""
    # This loop runs once per claimed item: the WorkItem is built in place (see ``work_item``), and items
    # enqueued together share their times, so a time is parsed only when it differs from the last one.
    items = []
    append = items.append
    new, set_values, set_payload_json = new_work_item_parts()
    running = ItemState.RUNNING
    last_run_after = last_created_at = None
    run_after_time = created_time = None
    for item_id, kind, key, payload, attempts, max_attempts, run_after, created_at, last_error in rows:
        if run_after != last_run_after:
            run_after_time, last_run_after = _sqlite_read_time(run_after), run_after
        if created_at != last_created_at:
            created_time, last_created_at = _sqlite_read_time(created_at), created_at
        item = new(WorkItem)
        # A JSON column has NUMERIC affinity in SQLite: a bare number comes back as a number.
        if payload.__class__ is str:
            set_payload_json(item, payload)
            payload = None
        else:
            set_payload_json(item, None)
        set_values(item, (
            item_id, kind, key, payload, running, attempts + 1, max_attempts, run_after_time, owner, until,
            last_error, None, created_time, now,
        ))
        append(item)
    return items


_CACHE: dict[Backend, HotSQL] = {}


def hot_sql(backend: Backend) -> HotSQL:
    """The (shared, immutable) hot statements of ``backend``."""
    found = _CACHE.get(backend)
    if found is None:
        found = _CACHE[backend] = HotSQL(backend)
    return found
