"""Reading work items: one by id or key, listings by state, kind, age and error, history, counts.

The summaries (counts by kind, what is due, results) are ``item_summaries.py``'s.

``WorkItems`` inherits these; they take no write lock (``Store.reading``).
"""

from __future__ import annotations

import builtins
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..clock import ensure_aware
from .item_summaries import READY_STATES, ItemSummaries
from .records import Attempt, AttemptOutcome, ItemState, WorkItem
from .schema import attempts as attempts_table
from .schema import work_item_keys, work_items
from .url import Backend

if TYPE_CHECKING:
    from .api import Store

__all__ = ["ITEM_COLUMNS", "ItemReads", "NextDue", "by_key", "item_from_row"]

ITEM_COLUMNS = tuple(work_items.c)


def by_key(backend: Backend, kind: str, key: str) -> sa.Select[Any]:
    """The item of ``kind`` with ``key``: on PostgreSQL through its key row (``work_items`` has no
    (kind, key) index there; migration 0007), on SQLite by the item's own unique index (migration 0015)."""
    if backend is Backend.SQLITE:
        return sa.select(*ITEM_COLUMNS).where(work_items.c.kind == kind, work_items.c.key == key)
    k = work_item_keys.c
    return (
        sa.select(*ITEM_COLUMNS)
        .join(work_item_keys, work_items.c.id == k.item_id)
        .where(k.kind == kind, k.key == key)
    )


def item_from_row(row: sa.Row[Any]) -> WorkItem:
    """A ``WorkItem`` from a row of every work_items column."""
    return WorkItem(
        id=row.id,
        kind=row.kind,
        key=row.key,
        payload=row.payload,
        state=ItemState(row.state),
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        run_after=row.run_after,
        lease_owner=row.lease_owner,
        lease_until=row.lease_until,
        last_error=row.last_error,
        result=row.result,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class NextDue:
    """The next item that can be claimed: when, its kind, and whether it waits for a lease to end."""

    at: datetime
    kind: str
    lease_end: bool = False


class ItemReads(ItemSummaries):
    """The reading operations on work items."""

    _store: Store

    def get(self, item_id: int) -> WorkItem | None:
        """The item with this id, or None."""
        with self._store.reading() as connection:
            row = connection.execute(sa.select(*ITEM_COLUMNS).where(work_items.c.id == item_id)).first()
        return item_from_row(row) if row is not None else None

    def queue_of(self, item_id: int) -> str | None:
        """The named queue of the item with this id, or None when there is no such item.

        A read of its own: ``WorkItem`` is laid out as a claim reads its row (the store's hottest path),
        and the queue is asked for only when a caller looks at one item (``Invoker.status``).
        """
        with self._store.reading() as connection:
            return connection.execute(sa.select(work_items.c.queue).where(work_items.c.id == item_id)).scalar()

    def next_due_item(self, kinds: Collection[str], queues: Collection[str] | None = None) -> NextDue | None:
        """What ``next_due`` finds, with the kind of the item it found (an idle worker logs it).

        The earliest ready time or lease end of an item of ``kinds`` (in ``queues``, when given); None
        when there is none.
        """
        kinds = list(kinds)
        if not kinds:
            return None
        c = work_items.c
        of_queues = c.queue.in_(list(queues)) if queues else sa.true()
        with self._store.reading() as connection:
            ready = connection.execute(
                sa.select(c.run_after, c.kind)
                .where(c.kind.in_(kinds), c.state.in_(READY_STATES), of_queues)
                .order_by(c.run_after, c.id)
                .limit(1)
            ).first()
            leased = connection.execute(
                sa.select(c.lease_until, c.kind)
                .where(c.kind.in_(kinds), c.state == ItemState.RUNNING, of_queues, c.lease_until.is_not(None))
                .order_by(c.lease_until, c.id)
                .limit(1)
            ).first()
        found = [NextDue(at=ready[0], kind=ready[1])] if ready is not None else []
        if leased is not None:
            found.append(NextDue(at=leased[0], kind=leased[1], lease_end=True))
        return min(found, key=lambda due: due.at) if found else None

    def find(self, kind: str, key: str) -> WorkItem | None:
        """The item of this kind with this key, or None."""
        with self._store.reading() as connection:
            row = connection.execute(by_key(self._store.backend, kind, key)).first()
        return item_from_row(row) if row is not None else None

    def list(
        self,
        *,
        state: ItemState | None = None,
        kind: str | None = None,
        updated_before: datetime | None = None,
        error_contains: str | None = None,
        limit: int | None = None,
    ) -> list[WorkItem]:
        """Items by state, kind, age and error text, oldest first."""
        c = work_items.c
        query = sa.select(*ITEM_COLUMNS).order_by(c.id)
        if state is not None:
            query = query.where(c.state == state)
        if kind is not None:
            query = query.where(c.kind == kind)
        if updated_before is not None:
            query = query.where(c.updated_at < ensure_aware(updated_before, "updated_before"))
        if error_contains:
            query = query.where(c.last_error.contains(error_contains, autoescape=True))
        if limit is not None:
            query = query.limit(limit)
        with self._store.reading() as connection:
            return [item_from_row(row) for row in connection.execute(query)]

    def history(self, item_id: int) -> builtins.list[Attempt]:  # `list` here is the method above
        """Every ended attempt at the item, in order.

        Failed and expired attempts have rows of their own. The successful attempt, always the last,
        is told by the item row itself (attempt number, owner, claimed and finished times), which
        spares every successful item a second write.
        """
        a = attempts_table.c
        c = work_items.c
        with self._store.reading() as connection:
            rows = connection.execute(
                sa.select(attempts_table).where(a.item_id == item_id).order_by(a.id)
            ).all()
            finished = connection.execute(
                sa.select(c.attempts, c.lease_owner, c.claimed_at, c.updated_at).where(
                    c.id == item_id, c.state == ItemState.SUCCEEDED
                )
            ).first()
        success = (
            [
                Attempt(
                    item_id=item_id,
                    attempt=finished.attempts,
                    owner=finished.lease_owner,
                    started_at=finished.claimed_at,
                    ended_at=finished.updated_at,
                    outcome=AttemptOutcome.SUCCEEDED,
                    error=None,
                )
            ]
            if finished is not None
            else []
        )
        return [
            Attempt(
                item_id=row.item_id,
                attempt=row.attempt,
                owner=row.owner,
                started_at=row.started_at,
                ended_at=row.ended_at,
                outcome=AttemptOutcome(row.outcome),
                error=row.error,
            )
            for row in rows
        ] + success

    def counts(self, *, kind: str | None = None) -> dict[ItemState, int]:
        """How many items are in each state."""
        c = work_items.c
        query = sa.select(c.state, sa.func.count()).group_by(c.state)
        if kind is not None:
            query = query.where(c.kind == kind)
        with self._store.reading() as connection:
            found = {ItemState(state): count for state, count in connection.execute(query)}
        return {state: found.get(state, 0) for state in ItemState}
