"""Summaries of work items: counts by kind and state, what is due or late, the next due time, results.

``WorkItems`` inherits these (through ``ItemReads``); the status report, the metrics endpoint, the
worker's idle wait, the planner's workload and the sensors read the queue through them, so no module
outside the store names a work-item column.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa

from .records import ItemState
from .schema import work_items
from .url import Backend

if TYPE_CHECKING:
    from .api import Store

__all__ = ["READY_STATES", "DueItem", "FinishedItem", "ItemFigures", "ItemSummaries"]

#: The states an item can be claimed from once its ``run_after`` has passed.
READY_STATES = (ItemState.PENDING, ItemState.FAILED)

# SQLite counts the unfinished states through the partial indexes that hold only them (schema.py), in
# their own words: a bound ``state IN (?, ?)`` cannot prove an index's WHERE, and without INDEXED BY
# and ``+kind`` (no index order wanted for the GROUP BY) the planner walks every item in (kind, key)
# order instead, finished ones included: 160 ms against under 1 ms on 100,000 succeeded items.
_READY_SQL = f"state IN ('{ItemState.PENDING.value}', '{ItemState.FAILED.value}')"
_SQLITE_UNFINISHED = tuple(
    f"SELECT kind, state, count(*) FROM work_items INDEXED BY {index} WHERE {where} GROUP BY +kind, +state"
    for index, where in (
        ("ix_work_items_ready", _READY_SQL),
        ("ix_work_items_leased", f"state = '{ItemState.RUNNING.value}'"),
        ("ix_work_items_dead", f"state = '{ItemState.DEAD.value}'"),
    )
)
_SQLITE_DUE = (
    "SELECT kind, count(*) FROM work_items INDEXED BY ix_work_items_ready "
    f"WHERE {_READY_SQL} AND run_after <= :due_by GROUP BY +kind"
)


class DueItem(NamedTuple):
    """A ready item whose ``run_after`` has passed: what a late-items listing shows."""

    id: int
    kind: str
    key: str | None
    run_after: datetime
    attempts: int


class FinishedItem(NamedTuple):
    """A succeeded or dead item as the planner's workload reads it."""

    kind: str
    state: ItemState
    attempts: int
    payload: Any
    result: Any


class ItemFigures(NamedTuple):
    """An item as the invocation metrics read it: its state, payload, result, times and busy time."""

    id: int
    state: ItemState
    payload: Any
    result: Any
    created_at: datetime
    updated_at: datetime
    busy_ms: float | None


class ItemSummaries:
    """The summary reads on work items."""

    _store: Store

    def counts_by_kind(self) -> dict[tuple[str, ItemState], int]:
        """How many items of each kind are in each state (pairs with no item left out).

        On SQLite, in one read transaction (one snapshot): the items per kind from the (kind, key)
        index, the unfinished states from their partial indexes, and ``succeeded`` the rest; the
        GROUP BY over every row it replaces read the whole table. PostgreSQL has no (kind, key) index
        to count from and scans the table either way, so it keeps the one GROUP BY.
        """
        c = work_items.c
        with self._store.reading() as connection:
            if self._store.backend is not Backend.SQLITE:
                rows = connection.execute(sa.select(c.kind, c.state, sa.func.count()).group_by(c.kind, c.state))
                return {(kind, ItemState(state)): count for kind, state, count in rows}
            totals: dict[str, int] = dict(connection.execute(sa.select(c.kind, sa.func.count()).group_by(c.kind)).all())
            counts: dict[tuple[str, ItemState], int] = {}
            for statement in _SQLITE_UNFINISHED:
                for kind, state, count in connection.exec_driver_sql(statement):
                    counts[(kind, ItemState(state))] = count
        unfinished: dict[str, int] = {}
        for (kind, _state), count in counts.items():
            unfinished[kind] = unfinished.get(kind, 0) + count
        for kind, total in totals.items():
            if total > unfinished.get(kind, 0):
                counts[(kind, ItemState.SUCCEEDED)] = total - unfinished.get(kind, 0)
        return counts

    def due_by_kind(self, due_by: datetime) -> dict[str, int]:
        """How many ready items of each kind were due at or before ``due_by`` (SQLite: the ready index)."""
        c = work_items.c
        with self._store.reading() as connection:
            if self._store.backend is Backend.SQLITE:
                due = sa.text(_SQLITE_DUE).bindparams(sa.bindparam("due_by", due_by, type_=c.run_after.type))
                return dict(connection.execute(due).all())
            query = (
                sa.select(c.kind, sa.func.count())
                .where(c.state.in_(READY_STATES), c.run_after <= due_by)
                .group_by(c.kind)
            )
            return dict(connection.execute(query).all())

    def due_items(self, due_by: datetime, *, limit: int) -> list[DueItem]:
        """Up to ``limit`` ready items due at or before ``due_by``, longest due first."""
        c = work_items.c
        query = (
            sa.select(c.id, c.kind, c.key, c.run_after, c.attempts)
            .where(c.state.in_(READY_STATES), c.run_after <= due_by)
            .order_by(c.run_after)
            .limit(limit)
        )
        with self._store.reading() as connection:
            return [DueItem(*row) for row in connection.execute(query)]

    def next_ready_at(self, kinds: Collection[str]) -> datetime | None:
        """The earliest ``run_after`` of a ready item of ``kinds`` (None: none is ready or waiting)."""
        c = work_items.c
        with self._store.reading() as connection:
            moment: datetime | None = connection.execute(
                sa.select(sa.func.min(c.run_after)).where(c.kind.in_(list(kinds)), c.state.in_(READY_STATES))
            ).scalar()
        return moment

    def next_due(self, kinds: Collection[str], queues: Collection[str] | None = None) -> datetime | None:
        """When the next item of ``kinds`` (in ``queues``, when given) can be claimed: the earliest ready
        time or lease end (None: none)."""
        c = work_items.c
        kinds = list(kinds)
        of_queues = c.queue.in_(list(queues)) if queues else sa.true()
        with self._store.reading() as connection:
            ready = connection.execute(
                sa.select(sa.func.min(c.run_after)).where(c.kind.in_(kinds), c.state.in_(READY_STATES), of_queues)
            ).scalar()
            leased = connection.execute(
                sa.select(sa.func.min(c.lease_until)).where(c.kind.in_(kinds), c.state == ItemState.RUNNING, of_queues)
            ).scalar()
        moments = [moment for moment in (ready, leased) if moment is not None]
        return min(moments) if moments else None

    def keys_with_prefix(self, kind: str, prefix: str) -> list[str]:
        """The keys of the items of ``kind`` that start with ``prefix`` (taken literally, not as a pattern)."""
        c = work_items.c
        with self._store.reading() as connection:
            return list(
                connection.execute(
                    sa.select(c.key).where(c.kind == kind, c.key.startswith(prefix, autoescape=True))
                ).scalars()
            )

    def latest_results(self, kind: str, *, limit: int) -> list[Any]:
        """The results of the last ``limit`` succeeded items of ``kind``, by key, newest first."""
        c = work_items.c
        query = (
            sa.select(c.result)
            .where(c.kind == kind, c.state == ItemState.SUCCEEDED)
            .order_by(c.key.desc())
            .limit(limit)
        )
        with self._store.reading() as connection:
            return list(connection.execute(query).scalars().all())

    def finished(self, kinds: Collection[str]) -> list[FinishedItem]:
        """The succeeded and dead items of ``kinds``, in the order they were created."""
        c = work_items.c
        query = (
            sa.select(c.kind, c.state, c.attempts, c.payload, c.result)
            .where(
                c.kind.in_(list(kinds)),
                c.state.in_([ItemState.SUCCEEDED, ItemState.DEAD]),
            )
            .order_by(c.created_at, c.id)
        )
        with self._store.reading() as connection:
            return [FinishedItem(row.kind, ItemState(row.state), *row[2:]) for row in connection.execute(query)]

    def figures(self, kind: str, *, since: datetime | None = None) -> list[ItemFigures]:
        """Every item of ``kind`` (created at or after ``since``) with what the metrics count."""
        w = work_items.c
        query = sa.select(w.id, w.state, w.payload, w.result, w.created_at, w.updated_at, w.busy_ms).where(
            w.kind == kind
        )
        if since is not None:
            query = query.where(w.created_at >= since)
        with self._store.reading() as connection:
            return [ItemFigures(row.id, ItemState(row.state), *row[2:]) for row in connection.execute(query)]
