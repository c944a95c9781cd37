"""The hot statements: claim, complete and ledger marks (the enqueues in ``hot_enqueue``), written once
per dialect, run as driver SQL.

Everything else in the store goes through SQLAlchemy Core. These run for every work item or record,
and there SQLAlchemy's per-call statement building, parameter processing and type coercion cost more
than the database work itself (profiles in benchmarks/README.md). So they are fixed SQL texts with
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
are bound as ``IN (?, ...)`` of their exact size (padding them to a power of two cost 1.5 % of the
claim loop in duplicate ids); a worker claims and completes batches of a few sizes, and the driver's
statement cache keeps the texts it uses.

Work-item times are ``types.UTCMicros``: on SQLite, integers of microseconds (``_sqlite_item_time``);
the other tables' times are ``UTCDateTime``'s text (``HotSQL.time``). A claimed ``WorkItem`` is its
row (``records.CLAIM_ROW_FIELDS``) and a tail all the claim's items share (``records.claim_tail``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ..clock import ensure_aware
from .hot_enqueue import _SQLITE_IDS_PER_STATEMENT, EnqueueSQL
from .records import CLAIM_ROW_FIELDS, ItemState, LedgerStatus, WorkItem, claim_tail, claimed_items, record_key
from .url import Backend

if TYPE_CHECKING:
    import sqlalchemy as sa

__all__ = [
    "DONE_CHANNEL",
    "RESULT_DROPPED",
    "RESULT_MAX_BYTES",
    "HotSQL",
    "Statements",
    "bounded_result",
    "complete_counting",
    "complete_returning",
    "hot_sql",
    "notify_done",
    "run_statements",
]

# records.CLAIM_ROW_FIELDS, read before the claim's UPDATE (so the attempt it counts is added here). The
# sqlite3 module hands over a column value at 500-1,000 instructions (it releases the GIL around each),
# the most of it when the value is text: so ``kind`` is NULL when it is the claim's usual kind (the first
# parameter, the claim tail's kind), and ``created_at`` when it equals ``run_after``.
_SQLITE_CLAIMED = (
    ("id", "id"),
    ("kind", "nullif(kind, ?)"),
    ("key", "key"),
    ("payload", "payload"),
    ("attempts", "attempts + 1"),
    ("max_attempts", "max_attempts"),
    ("run_after", "run_after"),
    ("created_at", "nullif(created_at, run_after)"),
    ("last_error", "last_error"),
)
if tuple(field for field, _column in _SQLITE_CLAIMED) != CLAIM_ROW_FIELDS:
    raise ImportError(f"hot.py's claim reads {_SQLITE_CLAIMED}; records.CLAIM_ROW_FIELDS is {CLAIM_ROW_FIELDS}")
_SQLITE_CLAIMED_COLUMNS = ", ".join(column for _field, column in _SQLITE_CLAIMED)

# The state names the statements write and read, spelled by the Enum (fixed texts, never parameters:
# the partial indexes' predicates name the states, and a bound state would not match them).
_PENDING, _FAILED = f"'{ItemState.PENDING.value}'", f"'{ItemState.FAILED.value}'"
_RUNNING, _SUCCEEDED = f"'{ItemState.RUNNING.value}'", f"'{ItemState.SUCCEEDED.value}'"
_READY = f"state IN ({_PENDING}, {_FAILED})"

#: The PostgreSQL channel a completion (and a dead letter) signals: callers waiting on a result LISTEN
#: on it. Not ``vardiya_work``: idle workers need not wake for work that ended.
DONE_CHANNEL = "vardiya_done"

#: The most JSON a work item keeps as its result (Lambda's limit on an async payload): a larger one is
#: replaced by ``result_dropped(size)``, as a result that does not fit must not undo the work behind it.
RESULT_MAX_BYTES = 256 * 1024

#: The key of the marker that stands for a result over ``RESULT_MAX_BYTES`` (``Invoker.wait`` reads it).
RESULT_DROPPED = "vardiya_result_dropped"


def result_dropped(size: int) -> str:
    """The JSON text stored instead of a result of ``size`` bytes, over ``RESULT_MAX_BYTES``."""
    return json.dumps({RESULT_DROPPED: {"bytes": size, "limit": RESULT_MAX_BYTES}})


def bounded_result(text: str | None) -> str | None:
    """``text`` (a result's JSON) if it fits ``RESULT_MAX_BYTES``, else the marker that says it did not."""
    if text is None or len(text) * 4 <= RESULT_MAX_BYTES:  # most results: no encoding needed to know
        return text
    size = len(text.encode())
    return text if size <= RESULT_MAX_BYTES else result_dropped(size)


def notify_done(connection: sa.Connection, backend: Backend) -> None:
    """Signal ``DONE_CHANNEL`` at commit (PostgreSQL; SQLite's waiters see the commit by ``data_version``)."""
    if backend is Backend.POSTGRESQL:
        connection.exec_driver_sql(_NOTIFY_DONE)


_NOTIFY_DONE = f"SELECT pg_notify('{DONE_CHANNEL}', '')"

_SQLITE_READY = f"""
SELECT {_SQLITE_CLAIMED_COLUMNS} FROM work_items INDEXED BY {{index}}
 WHERE {_READY} AND run_after <= ?{{kinds}}{{queues}}
 ORDER BY run_after, id LIMIT ?
"""

# ``started``: the first items of the claim are marked started by the claim itself (see
# ``WorkItems.claim``), the rest not; a claim of more items than that runs this statement twice.
_SQLITE_TAKE = f"""
UPDATE work_items
   SET state = {_RUNNING}, started = ?, lease_owner = ?, lease_until = ?, claimed_at = ?,
       attempts = attempts + 1, updated_at = ?
 WHERE id IN ({{marks}})
"""

# Mark held items started (``WorkItems.start``): a worker reaching its prefetched items.
_SQLITE_START = f"""
UPDATE work_items SET started = 1 WHERE id IN ({{marks}}) AND state = {_RUNNING} AND lease_owner = ?
"""
_POSTGRES_START = f"""
UPDATE work_items SET started = true WHERE id = ANY(%s) AND state = {_RUNNING} AND lease_owner = %s
"""

# records.CLAIM_ROW_FIELDS (attempts as the UPDATE left it); the payload comes back as text, decoded
# when the WorkItem's payload is first read. The picked rows are updated by their ids (an index scan
# of the primary key for the array): joined to the picked rows instead, the planner hashed the whole
# table whenever it held few rows, a seq scan of every item for every claim (1 ms of a 2.8 ms claim
# of 100 out of 5,000). The first ``start`` items in claim order are marked started: those up to the
# start-th picked (run_after, id), found once (a window function cannot sit in the locking SELECT);
# fewer picked than ``start`` leaves no start-th, and all of them are started.
_POSTGRES_CLAIM = f"""
WITH picked AS (
    SELECT id, run_after FROM work_items
     WHERE {_READY} AND run_after <= %s{{kinds}}{{queues}}
     ORDER BY run_after, id LIMIT %s
       FOR UPDATE SKIP LOCKED
)
UPDATE work_items AS w
   SET state = {_RUNNING},
       started = %s AND coalesce(
           (w.run_after, w.id) <= (SELECT run_after, id FROM picked ORDER BY run_after, id OFFSET %s LIMIT 1), true),
       lease_owner = %s, lease_until = %s, claimed_at = %s, attempts = w.attempts + 1, updated_at = %s
 WHERE w.id = ANY(ARRAY(SELECT id FROM picked))
RETURNING w.id, w.kind, w.key, w.payload::text, w.attempts, w.max_attempts, w.run_after, w.created_at,
          w.last_error
"""

_SQLITE_COMPLETE = f"""
UPDATE work_items SET state = {_SUCCEEDED}, lease_until = NULL, updated_at = ?
 WHERE id IN ({{marks}}) AND state = {_RUNNING} AND lease_owner = ?{{returning}}
"""

# The ids go in ascending, so the rows are locked in id order, as a heartbeat's ``IN`` list locks them
# (a reap skips locked rows): two updates of the same rows never wait for each other in a cycle.
#
# Every completion also signals ``DONE_CHANNEL`` (once per transaction: PostgreSQL folds a repeated
# notification), so a caller waiting on ``Handle.result`` wakes the moment its call is recorded.
_POSTGRES_COMPLETE = f"""
UPDATE work_items SET state = {_SUCCEEDED}, lease_until = NULL, updated_at = %s
 WHERE id = ANY(%s) AND state = {_RUNNING} AND lease_owner = %s
RETURNING id, pg_notify('{DONE_CHANNEL}', '')
"""

# A completion that also stores each item's handler busy time and result (JSON text; NULL keeps what
# the row has): a successful async call is told by its item, not by a call-log row (migration 0006).
_POSTGRES_COMPLETE_TIMED = f"""
UPDATE work_items AS w SET state = {_SUCCEEDED}, lease_until = NULL, updated_at = %s, busy_ms = v.busy,
       result = coalesce(v.result, w.result)
  FROM unnest(%s::bigint[], %s::float8[], %s::jsonb[]) AS v (id, busy, result)
 WHERE w.id = v.id AND w.state = {_RUNNING} AND w.lease_owner = %s
RETURNING w.id, pg_notify('{DONE_CHANNEL}', '')
"""

_SQLITE_COMPLETE_TIMED = f"""
UPDATE work_items SET state = {_SUCCEEDED}, lease_until = NULL, updated_at = ?, busy_ms = v.column2,
       result = coalesce(v.column3, work_items.result)
  FROM (VALUES {{rows}}) AS v
 WHERE work_items.id = v.column1 AND work_items.state = {_RUNNING} AND work_items.lease_owner = ?{{returning}}
"""



def _id_chunks(ids: Sequence[int]) -> Iterator[Sequence[int]]:
    """``ids`` in chunks of at most ``_SQLITE_IDS_PER_STATEMENT`` for ``IN (?, ...)``."""
    if len(ids) <= _SQLITE_IDS_PER_STATEMENT:
        yield ids
        return
    for start in range(0, len(ids), _SQLITE_IDS_PER_STATEMENT):
        yield ids[start : start + _SQLITE_IDS_PER_STATEMENT]


def _marks(size: int) -> str:
    return ", ".join(["?"] * size)


@lru_cache(maxsize=256)
def _sqlite_take(size: int) -> str:
    return _SQLITE_TAKE.format(marks=_marks(size))


@lru_cache(maxsize=64)
def _sqlite_start(size: int) -> str:
    return _SQLITE_START.format(marks=_marks(size))


@lru_cache(maxsize=256)
def _sqlite_complete(size: int, returning: bool) -> str:
    return _SQLITE_COMPLETE.format(marks=_marks(size), returning="\nRETURNING id" if returning else "")


@lru_cache(maxsize=256)
def _sqlite_complete_timed(size: int, returning: bool) -> str:
    return _SQLITE_COMPLETE_TIMED.format(
        rows=", ".join(["(?, ?, ?)"] * size), returning="\nRETURNING id" if returning else ""
    )


_LEDGER_COLUMNS = (
    "job", "period", "record", "slot", "status", "attempts", "first_attempt_at", "last_attempt_at",
    "duration_ms", "rows", "bytes", "error",
)

_DONE = f"'{LedgerStatus.DONE.value}'"
# ``done`` is sticky: a later failed mark of a done record changes nothing but the attempt count.
_LEDGER_UPSERT = f"""
INSERT INTO ledger ({{columns}}) VALUES ({{marks}})
ON CONFLICT (job, period, record) DO UPDATE SET
    status = CASE WHEN ledger.status = {_DONE} THEN ledger.status ELSE excluded.status END,
    attempts = ledger.attempts + excluded.attempts,
    first_attempt_at = COALESCE(ledger.first_attempt_at, excluded.first_attempt_at),
    last_attempt_at = excluded.last_attempt_at,
    duration_ms = CASE WHEN ledger.status = {_DONE} THEN ledger.duration_ms ELSE excluded.duration_ms END,
    rows = CASE WHEN ledger.status = {_DONE} THEN ledger.rows ELSE excluded.rows END,
    bytes = CASE WHEN ledger.status = {_DONE} THEN ledger.bytes ELSE excluded.bytes END,
    error = CASE WHEN ledger.status = {_DONE} THEN ledger.error ELSE excluded.error END,
    slot = COALESCE(excluded.slot, ledger.slot)
"""


def _sqlite_text_time(moment: datetime | None) -> str | None:
    """UTC text in SQLAlchemy's SQLite DATETIME format (``UTCDateTime``), which sorts and compares as time."""
    if moment is None:
        return None
    utc = ensure_aware(moment, "timestamp")
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d} "
        f"{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}.{utc.microsecond:06d}"
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _sqlite_item_time(moment: datetime | None) -> int | None:
    """A work-item time as SQLite stores it (``types.UTCMicros``): microseconds since the epoch."""
    if moment is None:
        return None
    if moment.tzinfo is None or moment.tzinfo.utcoffset(moment) is None:
        ensure_aware(moment, "timestamp")  # raises, saying why
    return (moment - _EPOCH) // _MICROSECOND


def _postgres_time(moment: datetime | None) -> datetime | None:
    return None if moment is None else ensure_aware(moment, "timestamp")


class HotSQL(EnqueueSQL):
    """The hot statements of one backend, with the conversions their values need."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        sqlite = backend is Backend.SQLITE
        self._time = _sqlite_text_time if sqlite else _postgres_time
        marks = ", ".join(["?" if sqlite else "%s"] * len(_LEDGER_COLUMNS))
        self.ledger_upsert = _LEDGER_UPSERT.format(columns=", ".join(_LEDGER_COLUMNS), marks=marks)
        claim = _SQLITE_READY if sqlite else _POSTGRES_CLAIM
        kinds = " AND kind IN (SELECT value FROM json_each(?))" if sqlite else " AND kind = ANY(%s)"
        queues = " AND queue IN (SELECT value FROM json_each(?))" if sqlite else " AND queue = ANY(%s)"
        # (by kinds, by queues) -> the claim's text; SQLite reads the per-queue index when queues are given
        self._claims = {
            (by_kind, by_queue): claim.format(
                kinds=kinds if by_kind else "",
                queues=queues if by_queue else "",
                index="ix_work_items_queue_ready" if by_queue else "ix_work_items_ready",
            )
            for by_kind in (False, True)
            for by_queue in (False, True)
        }
        self._item_time = _sqlite_item_time if sqlite else _postgres_time

    def time(self, moment: datetime | None) -> Any:
        """A timestamp as the driver takes it for a UTCDateTime column (every table but work_items)."""
        return self._time(moment)

    def item_time(self, moment: datetime | None) -> Any:
        """A timestamp as the driver takes it for a work_items column (``UTCMicros``)."""
        return self._item_time(moment)

    def claim(
        self,
        n: int,
        kinds: Sequence[str] | None,
        owner: str,
        now: datetime,
        until: datetime,
        start: int,
        queues: Sequence[str] | None = None,
    ) -> tuple[str, tuple[Any, ...]]:
        """The PostgreSQL claim statement and its parameters (SQLite claims with ``sqlite_claim``);
        the first ``start`` items in claim order are marked started. ``queues``: only items of those."""
        t_now, t_until = self._item_time(now), self._item_time(until)
        ready = (t_now, *((list(kinds),) if kinds else ()), *((list(queues),) if queues else ()), n)
        marks = (start > 0, max(0, start - 1))
        return self._claims[bool(kinds), bool(queues)], (*ready, *marks, owner, t_until, t_now, t_now)

    def start_statements(self, ids: Sequence[int], owner: str) -> Statements:
        """The statements that mark the held ``ids`` started."""
        if self.backend is Backend.POSTGRESQL:
            return [(_POSTGRES_START, (sorted(ids), owner))]  # ascending: see _POSTGRES_COMPLETE
        return [(_sqlite_start(len(chunk)), (*chunk, owner)) for chunk in _id_chunks(ids)]

    def claimed(self, rows: Sequence[Any], owner: str, now: datetime, until: datetime) -> list[WorkItem]:
        """WorkItems from the PostgreSQL claim's rows, oldest ``run_after`` first.

        What the claim itself set is filled in, not read back.
        """
        return claimed_items(sorted(map(tuple, rows), key=_run_after_and_id), claim_tail(owner, until, now))

    def sqlite_claim(
        self,
        connection: sqlite3.Connection | sqlite3.Cursor,
        n: int,
        kinds: Sequence[str] | None,
        owner: str,
        now: datetime,
        until: datetime,
        usual_kind: str | None = None,
        start: int | None = None,
        queues: Sequence[str] | None = None,
    ) -> list[WorkItem]:
        """Claim on the driver connection (or a cursor of it), inside its open ``BEGIN IMMEDIATE`` transaction.

        ``usual_kind``: the kind most of the items are expected to have (any guess is correct; a good
        one is cheaper): the only one of ``kinds``, else the kind of the caller's last claim.
        ``start``: how many of the first items are marked started (None: all).
        """
        t_now = _sqlite_item_time(now)
        if kinds and len(kinds) == 1:
            usual_kind = kinds[0]
        ready = (
            usual_kind, t_now, *((json.dumps(list(kinds)),) if kinds else ()),
            *((json.dumps(list(queues)),) if queues else ()), n,
        )
        rows = connection.execute(self._claims[bool(kinds), bool(queues)], ready).fetchall()
        if not rows:
            return []
        claimed = (owner, _sqlite_item_time(until), t_now, t_now)
        ids = list(map(_first, rows))
        begun = len(ids) if start is None else start
        for flag, part in ((1, ids[:begun]), (0, ids[begun:])):
            if part:
                for chunk in _id_chunks(part):
                    connection.execute(_sqlite_take(len(chunk)), (flag, *claimed, *chunk))
        return claimed_items(rows, claim_tail(owner, until, now, usual_kind))

    def complete_statements(
        self, ids: Collection[int], owner: str, now: datetime, *, returning: bool = True
    ) -> list[tuple[str, tuple[Any, ...]]]:
        """The statements (with parameters) that mark the held ``ids`` succeeded.

        With ``returning`` each returns the ids it changed; without (SQLite only), count the changed rows.
        """
        if self.backend is Backend.POSTGRESQL:
            return [(_POSTGRES_COMPLETE, (self._item_time(now), sorted(ids), owner))]
        t_now = _sqlite_item_time(now)
        return [
            (_sqlite_complete(len(chunk), returning), (t_now, *chunk, owner))
            for chunk in _id_chunks(ids if isinstance(ids, list | tuple) else list(ids))
        ]

    def complete_timed_statements(
        self,
        ids: Sequence[int],
        busy: Sequence[float | None],
        results: Sequence[str | None],
        owner: str,
        now: datetime,
        *,
        returning: bool = True,
    ) -> list[tuple[str, tuple[Any, ...]]]:
        """``complete_statements`` that also set each item's ``busy_ms`` and ``result`` (JSON text or None,
        which keeps the stored result); ``busy`` and ``results`` run along ``ids``. A result over
        ``RESULT_MAX_BYTES`` is stored as the marker ``result_dropped`` makes."""
        results = [bounded_result(text) for text in results]
        if self.backend is Backend.POSTGRESQL:
            rows = sorted(zip(ids, busy, results, strict=True), key=_first)  # ascending ids: see _POSTGRES_COMPLETE
            return [(_POSTGRES_COMPLETE_TIMED, (self._item_time(now), *map(list, zip(*rows, strict=True)), owner))]
        t_now = _sqlite_item_time(now)
        statements = []
        # three parameters a row: a third of the ids per statement that a plain completion binds
        step = _SQLITE_IDS_PER_STATEMENT // 3
        for start in range(0, len(ids), step):
            rows = list(zip(ids[start : start + step], busy[start : start + step], results[start : start + step], strict=True))
            statements.append((_sqlite_complete_timed(len(rows), returning), (t_now, *chain(*rows), owner)))
        return statements

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


_first = itemgetter(0)


def _run_after_and_id(row: Sequence[Any]) -> tuple[Any, int]:
    return row[6], row[0]


#: Statements with their parameters, as ``HotSQL`` builds them for the driver.
Statements = Sequence[tuple[str, tuple[Any, ...]]]


def run_statements(cursor: sqlite3.Cursor, statements: Statements) -> None:
    """Run ``statements`` (driver SQL) on ``cursor``."""
    for statement, parameters in statements:
        cursor.execute(statement, parameters)


def complete_counting(
    cursor: sqlite3.Cursor, statements: Statements, ids: Sequence[int], then: Callable[..., None] | None
) -> bool:
    """Run completion ``statements`` and say whether all ``ids`` were held; if not, roll back (driver SQL).

    ``then(cursor, lost)`` writes what commits with the completion (all held: ``lost`` is empty).
    """
    changed = 0
    for statement, parameters in statements:
        changed += cursor.execute(statement, parameters).rowcount
    # Repeated ids change their row once: only when the count falls short is it worth deduplicating.
    if changed == len(ids) or changed == len(set(ids)):
        if then is not None:
            then(cursor, set())
        return True
    cursor.connection.rollback()
    return False


def complete_returning(
    cursor: sqlite3.Cursor, statements: Statements, ids: Sequence[int], then: Callable[..., None] | None
) -> set[int]:
    """Run completion ``statements`` (with ``RETURNING``); returns the ids that were no longer held."""
    held = {row[0] for statement, parameters in statements for row in cursor.execute(statement, parameters).fetchall()}
    lost = set(ids) - held
    if then is not None:
        then(cursor, lost)
    return lost


_CACHE: dict[Backend, HotSQL] = {}


def hot_sql(backend: Backend) -> HotSQL:
    """The (shared, immutable) hot statements of ``backend``."""
    found = _CACHE.get(backend)
    if found is None:
        found = _CACHE[backend] = HotSQL(backend)
    return found
