"""The ends of invocation attempts: the item's new state, its rewritten payload and the call log, at once.

An attempt at an async call or a stream batch ends in one transaction that (only while the worker still
holds the item) appends the attempt to the item's history, writes the handler calls it made to
``invocation_calls``, and sets the item to ``succeeded``, ``failed`` (retry at a time, with the records
still to do as its payload) or ``dead`` (with the records dead-lettered and what co-failed as its
result). A worker that lost its lease writes nothing.

The one exception is the common case: an async call that succeeded is told by its item (state, attempt
count, ``busy_ms``), as its history is, not by a call-log row, which cost more than the claim and the
completion together on PostgreSQL (migration 0006). Many such completions share a transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..rules.calls import CallOutcome, CallRow
from .backend import times_of
from .hot import notify_done
from .invocation_reads import InvocationReads
from .records import AttemptOutcome, ItemState
from .schema import invocation_calls, work_items
from .sqlite import SQLITE_TIMES
from .url import Backend

if TYPE_CHECKING:
    from .api import Store

__all__ = ["CallRow", "Invocations"]


def _call_row(handler: str, item_id: int, attempt: int, call: CallRow) -> dict[str, Any]:
    return {
        "handler": handler,
        "item_id": item_id,
        "attempt": attempt,
        "started_at": call.started_at,
        "ended_at": call.ended_at,
        "busy_ms": call.busy_ms,
        "records": call.records,
        "failed": call.failed,
        "outcome": CallOutcome(call.outcome).value,
        "error": call.error,
    }


_CALL_COLUMNS = tuple(column.name for column in invocation_calls.c if column.name != "id")
# ``Invocations.complete`` builds its rows as tuples in this order
assert _CALL_COLUMNS == (
    "handler", "item_id", "attempt", "started_at", "ended_at", "busy_ms", "records", "failed", "outcome", "error"
), _CALL_COLUMNS
_SQLITE_INSERT_CALLS = f"INSERT INTO invocation_calls ({', '.join(_CALL_COLUMNS)}) VALUES ({', '.join('?' * len(_CALL_COLUMNS))})"
# One statement over arrays: through SQLAlchemy's executemany, psycopg sent one INSERT per row, the
# largest share of the database time of a batch of 100 completions (benchmarks/README.md, bench_async).
_POSTGRES_INSERT_CALLS = (
    f"INSERT INTO invocation_calls ({', '.join(_CALL_COLUMNS)}) SELECT * FROM unnest(%s::text[], %s::bigint[], "
    "%s::int[], %s::timestamptz[], %s::timestamptz[], %s::float8[], %s::int[], %s::int[], %s::text[], %s::text[])"
)


class Invocations(InvocationReads):
    """Recording the end of invocation attempts in one store (and, inherited, reading the call log)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def _insert_calls(self, connection: sa.Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Write call-log rows as driver SQL, times converted as ``UTCDateTime`` would (``hot.py``)."""
        time = times_of(self._store.backend).time
        self._insert_call_values(
            connection,
            [
                tuple(time(row[name]) if name in ("started_at", "ended_at") else row[name] for name in _CALL_COLUMNS)
                for row in rows
            ],
        )

    def _insert_call_values(self, connection: sa.Connection, values: list[tuple[Any, ...]]) -> None:
        """Write call-log rows given as tuples in ``_CALL_COLUMNS`` order, times already converted."""
        if self._store.backend is Backend.POSTGRESQL:
            connection.exec_driver_sql(_POSTGRES_INSERT_CALLS, tuple(list(column) for column in zip(*values, strict=True)))
        else:
            connection.exec_driver_sql(_SQLITE_INSERT_CALLS, values)

    def finish(
        self,
        item_id: int,
        *,
        owner: str,
        handler: str,
        attempt: int,
        state: ItemState,
        calls: Sequence[CallRow],
        payload: Any = None,
        result: Any = None,
        error: str | None = None,
        retry_at: datetime | None = None,
        traceback: str | None = None,
    ) -> bool:
        """End the attempt; False (and nothing written) when ``owner`` no longer holds the item.

        A failed attempt's history row keeps ``error`` and ``traceback`` (``failures.py``)."""
        now = self._store.clock.now()
        items = self._store.items
        c = work_items.c
        values: dict[str, Any] = {"state": state, "updated_at": now, "lease_until": None}
        if payload is not None:
            values["payload"] = payload
        if result is not None:
            values["result"] = result
        if state is ItemState.SUCCEEDED:
            values["last_error"] = error
        else:
            values |= {"lease_owner": None, "last_error": error}
            if state is ItemState.FAILED:
                values["run_after"] = retry_at
        with self._store.transaction() as connection:
            if state is not ItemState.SUCCEEDED:
                items._record_attempts(connection, [item_id], owner, now, AttemptOutcome.FAILED, error)
                self._store.failures.keep_attempt_traceback(connection, [item_id], traceback)
            elif self._store.backend.value == "postgresql":
                items._lock_held(connection, [item_id], owner)
            updated = connection.execute(
                sa.update(work_items).where(items._held([item_id], owner)).values(values).returning(c.id)
            ).first()
            if updated is None:
                return False
            if state is not ItemState.FAILED:  # an end: wake callers waiting on its result
                notify_done(connection, self._store.backend)
            if calls:
                self._insert_calls(connection, [_call_row(handler, item_id, attempt, call) for call in calls])
        return True

    def complete(
        self,
        entries: Sequence[tuple[int, int, str, CallRow | None, Any, float | None]],
        *,
        owner: str,
    ) -> set[int]:
        """Record many successful attempts in one transaction.

        Each entry is (item id, attempt, handler, call, result, busy_ms): ``call`` is a handler call for
        the call log (a stream batch's), ``busy_ms`` the busy time of an async call, which its item
        keeps instead of a call-log row; either is None when there is none (a call dedup answered).
        Returns the ids ``owner`` no longer held: nothing is written for those.
        """
        if not entries:
            return set()
        items = self._store.items
        ids = [entry[0] for entry in entries]
        results = {entry[0]: entry[4] for entry in entries if entry[4] is not None}
        busy = {entry[0]: entry[5] for entry in entries if entry[5] is not None}
        logged = [entry for entry in entries if entry[3] is not None]
        if self._store.backend is Backend.SQLITE:

            def log_calls(cursor: Any, lost: set[int]) -> None:
                values = self._call_values(logged, lost, SQLITE_TIMES.time)
                if values:
                    cursor.executemany(_SQLITE_INSERT_CALLS, values)

            return items.complete_on_driver(ids, owner, results=results, busy=busy, then=log_calls if logged else None)
        if not logged:  # async calls: the completion is one statement (``WorkItems.complete_many``)
            return items.complete_many(ids, owner=owner, results=results, busy=busy)
        with self._store.transaction() as connection:
            lost = items.complete_in(connection, ids, owner=owner, results=results, busy=busy)
            values = self._call_values(logged, lost, times_of(self._store.backend).time)
            if values:
                self._insert_call_values(connection, values)
        return lost

    @staticmethod
    def _call_values(
        entries: Sequence[tuple[int, int, str, CallRow | None, Any, float | None]], lost: set[int], time: Any
    ) -> list[tuple[Any, ...]]:
        """Call-log rows (``_CALL_COLUMNS`` order) of the entries' calls, but those of lost items."""
        return [
            (handler, item_id, attempt, time(call.started_at), time(call.ended_at), call.busy_ms, call.records,
             call.failed, CallOutcome(call.outcome).value, call.error)
            for item_id, attempt, handler, call, _result, _busy in entries
            if call is not None and item_id not in lost
        ]

    def calls(self, *, handler: str, since: datetime | None = None) -> list[Mapping[str, Any]]:
        """The logged calls of a handler (started at or after ``since``), oldest first."""
        q = invocation_calls.c
        query = sa.select(invocation_calls).where(q.handler == handler).order_by(q.id)
        if since is not None:
            query = query.where(q.started_at >= since)
        with self._store.reading() as connection:
            return [row._asdict() for row in connection.execute(query)]
