"""Dedup keys: a key seen again while it is live is a duplicate, and the stored outcome is returned.

A key is live until ``expires_at``, and beyond it for as long as the work item it is attached to is
dead: a dead-lettered record redriven after the window would otherwise run a second time for every
record that had in fact already reached its destination.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..clock import to_seconds
from ..errors import InvalidInput
from .records import DedupKey, DedupOutcome, ItemState
from .schema import dedup_keys, work_items
from .url import Backend

if TYPE_CHECKING:
    from .api import Store

__all__ = ["DedupKeys"]


def _key(row: sa.Row[Any]) -> DedupKey:
    return DedupKey(
        scope=row.scope,
        key=row.key,
        first_seen=row.first_seen,
        expires_at=row.expires_at,
        outcome=DedupOutcome(row.outcome),
        result=row.result,
        item_id=row.item_id,
    )


def _held_by_dead_item() -> sa.ColumnElement[bool]:
    w = work_items.c
    return sa.exists().where(w.id == dedup_keys.c.item_id, w.state == ItemState.DEAD)


def _live(now: datetime) -> sa.ColumnElement[bool]:
    return sa.or_(dedup_keys.c.expires_at > now, _held_by_dead_item())


class DedupKeys:
    """The dedup-key operations of one store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def check(
        self,
        scope: str,
        key: str,
        *,
        window: float | timedelta,
        item_id: int | None = None,
    ) -> DedupKey | None:
        """Register ``key`` for ``scope`` unless a live copy exists.

        Returns None when the caller is first (the key is now held for ``window``, outcome pending) and
        the live key when this is a duplicate, so the handler must not run.
        """
        seconds = to_seconds(window)
        if seconds <= 0:
            raise InvalidInput(f"a dedup window must be longer than 0 s, got {seconds} s")
        now = self._store.clock.now()
        values = {
            "scope": scope,
            "key": key,
            "first_seen": now,
            "expires_at": now + timedelta(seconds=seconds),
            "outcome": DedupOutcome.PENDING,
            "result": None,
            "item_id": item_id,
        }
        c = dedup_keys.c
        with self._store.transaction() as connection:
            inserted = connection.execute(
                self._store.dialect_insert(dedup_keys)
                .values(values)
                .on_conflict_do_nothing(index_elements=["scope", "key"])
                .returning(c.key)
            ).first()
            if inserted is not None:
                return None
            existing = sa.select(dedup_keys).where(c.scope == scope, c.key == key)
            if self._store.backend is Backend.POSTGRESQL:
                existing = existing.with_for_update()
            row = connection.execute(existing).one()
            live = connection.execute(
                sa.select(_live(now)).select_from(dedup_keys).where(c.scope == scope, c.key == key)
            ).scalar_one()
            if live:
                return _key(row)
            connection.execute(
                sa.update(dedup_keys).where(c.scope == scope, c.key == key).values(values)
            )
            return None

    def settle(self, scope: str, key: str, *, outcome: DedupOutcome, result: Any = None) -> None:
        """Store the outcome (and result) of the invocation that holds the key."""
        c = dedup_keys.c
        with self._store.transaction() as connection:
            connection.execute(
                sa.update(dedup_keys).where(c.scope == scope, c.key == key).values(outcome=outcome, result=result)
            )

    def attach(self, scope: str, key: str, item_id: int) -> None:
        """Tie the key to a work item, so the key stays live while that item is dead."""
        c = dedup_keys.c
        with self._store.transaction() as connection:
            connection.execute(sa.update(dedup_keys).where(c.scope == scope, c.key == key).values(item_id=item_id))

    def get(self, scope: str, key: str) -> DedupKey | None:
        """The stored key, live or not, or None."""
        c = dedup_keys.c
        with self._store.reading() as connection:
            row = connection.execute(sa.select(dedup_keys).where(c.scope == scope, c.key == key)).first()
        return _key(row) if row is not None else None

    def is_live(self, scope: str, key: str) -> bool:
        """Whether a second invocation with this key now would be a duplicate."""
        c = dedup_keys.c
        now = self._store.clock.now()
        with self._store.reading() as connection:
            return bool(
                connection.execute(
                    sa.select(sa.func.count()).select_from(dedup_keys).where(c.scope == scope, c.key == key, _live(now))
                ).scalar_one()
            )

    def expire(self) -> int:
        """Delete keys past their window, except those held by dead items; returns how many."""
        now = self._store.clock.now()
        with self._store.transaction() as connection:
            return connection.execute(
                sa.delete(dedup_keys).where(dedup_keys.c.expires_at <= now, ~_held_by_dead_item())
            ).rowcount
