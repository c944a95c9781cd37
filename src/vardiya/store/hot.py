"""The hot statements: claim, complete and ledger marks, written once per dialect and run as driver SQL.

Everything else in the store goes through SQLAlchemy Core. These three run for every work item or
record, and there SQLAlchemy's per-call statement building, parameter processing and type coercion cost
more than the database work itself (profiles in benchmarks/README.md). So they are fixed SQL texts with
bound parameters only — no value is ever formatted into them — and their values are converted here
exactly as the column types in ``types.py`` would convert them.

SQLite reads the ready rows through ``INDEXED BY ix_work_items_ready``: without it the planner picks
another index and sorts every ready row on each claim, and if the partial index ever stopped matching,
SQLite would fail loudly ("no query solution") instead of quietly getting slow.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from ..clock import ensure_aware
from .records import ItemState, WorkItem, record_key
from .url import Backend

__all__ = ["HotSQL", "hot_sql"]

_CLAIMED_COLUMNS = "id, kind, key, payload, attempts, max_attempts, run_after, created_at, last_error"

_SQLITE_CLAIM = f"""
UPDATE work_items
   SET state = 'running', lease_owner = ?, lease_until = ?, claimed_at = ?, attempts = attempts + 1,
       updated_at = ?
 WHERE id IN (SELECT id FROM work_items INDEXED BY ix_work_items_ready
               WHERE state IN ('pending', 'failed') AND run_after <= ?{{kinds}}
               ORDER BY run_after, id LIMIT ?)
RETURNING {_CLAIMED_COLUMNS}
"""

_POSTGRES_CLAIM = f"""
WITH picked AS (
    SELECT id FROM work_items
     WHERE state IN ('pending', 'failed') AND run_after <= %s{{kinds}}
     ORDER BY run_after, id LIMIT %s
       FOR UPDATE SKIP LOCKED
)
UPDATE work_items AS w
   SET state = 'running', lease_owner = %s, lease_until = %s, claimed_at = %s, attempts = w.attempts + 1,
       updated_at = %s
  FROM picked
 WHERE w.id = picked.id
RETURNING {", ".join("w." + name.strip() for name in _CLAIMED_COLUMNS.split(","))}
"""

_SQLITE_COMPLETE = """
UPDATE work_items SET state = 'succeeded', lease_until = NULL, updated_at = ?
 WHERE id IN (SELECT value FROM json_each(?)) AND state = 'running' AND lease_owner = ?
RETURNING id
"""

_POSTGRES_COMPLETE = """
UPDATE work_items SET state = 'succeeded', lease_until = NULL, updated_at = %s
 WHERE id = ANY(%s) AND state = 'running' AND lease_owner = %s
RETURNING id
"""

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
        self._claim_any = (_SQLITE_CLAIM if sqlite else _POSTGRES_CLAIM).format(kinds="")
        self._claim_kinds = (_SQLITE_CLAIM if sqlite else _POSTGRES_CLAIM).format(
            kinds=" AND kind IN (SELECT value FROM json_each(?))" if sqlite else " AND kind = ANY(%s)"
        )
        self.complete = _SQLITE_COMPLETE if sqlite else _POSTGRES_COMPLETE

    def time(self, moment: datetime | None) -> Any:
        """A timestamp as the driver takes it for a UTCDateTime column."""
        return self._time(moment)

    def claim(
        self, n: int, kinds: Sequence[str] | None, owner: str, now: datetime, until: datetime
    ) -> tuple[str, tuple[Any, ...]]:
        """The claim statement and its parameters."""
        t_now, t_until = self._time(now), self._time(until)
        if self.backend is Backend.SQLITE:
            ready: tuple[Any, ...] = (t_now, json.dumps(list(kinds)), n) if kinds else (t_now, n)
            return (self._claim_kinds if kinds else self._claim_any), (owner, t_until, t_now, t_now, *ready)
        ready = (t_now, list(kinds), n) if kinds else (t_now, n)
        return (self._claim_kinds if kinds else self._claim_any), (*ready, owner, t_until, t_now, t_now)

    def claimed(self, rows: Sequence[Any], owner: str, now: datetime, until: datetime) -> list[WorkItem]:
        """WorkItems from the claim's rows; what the claim itself set is filled in, not read back."""
        sqlite = self.backend is Backend.SQLITE
        items = []
        times: dict[str, datetime | None] = {}  # items enqueued together share their times: parse once
        for row in rows:
            item_id, kind, key, payload, attempts, max_attempts, run_after, created_at, last_error = row
            if sqlite:
                # A JSON column has NUMERIC affinity in SQLite: a bare number comes back as a number.
                if payload == "null":
                    payload = None
                elif isinstance(payload, str):
                    payload = json.loads(payload)
                parsed = times.get(run_after)
                if parsed is None:
                    parsed = times[run_after] = _sqlite_read_time(run_after)
                run_after = parsed
                parsed = times.get(created_at)
                if parsed is None:
                    parsed = times[created_at] = _sqlite_read_time(created_at)
                created_at = parsed
            items.append(
                WorkItem(
                    id=item_id, kind=kind, key=key, payload=payload, state=ItemState.RUNNING,
                    attempts=attempts, max_attempts=max_attempts, run_after=run_after,
                    lease_owner=owner, lease_until=until, last_error=last_error, result=None,
                    created_at=created_at, updated_at=now,
                )
            )
        items.sort(key=lambda item: (item.run_after, item.id))
        return items

    def complete_params(self, ids: Sequence[int], owner: str, now: datetime) -> tuple[Any, ...]:
        """Parameters of the complete statement."""
        if self.backend is Backend.SQLITE:
            return (self._time(now), json.dumps(list(ids)), owner)
        return (self._time(now), list(ids), owner)

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


_CACHE: dict[Backend, HotSQL] = {}


def hot_sql(backend: Backend) -> HotSQL:
    """The (shared, immutable) hot statements of ``backend``."""
    found = _CACHE.get(backend)
    if found is None:
        found = _CACHE[backend] = HotSQL(backend)
    return found
