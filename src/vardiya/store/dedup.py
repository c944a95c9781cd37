"""Dedup keys: a key seen again while it is live is a duplicate, and the stored outcome is returned.

A key is live until ``expires_at``, and beyond it for as long as the work item it is attached to is
dead: a dead-lettered record redriven after the window would otherwise run a second time for every
record that had in fact already reached its destination.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..clock import to_seconds
from ..errors import InvalidInput
from ..rules.dedup import is_duplicate
from .records import DedupKey, DedupOutcome, ItemState
from .schema import dedup_keys, work_items
from .types import JSONDocument, UTCDateTime
from .url import Backend

if TYPE_CHECKING:
    from .api import Store

__all__ = ["DedupKeys"]

_UNFINISHED = (ItemState.PENDING.value, ItemState.RUNNING.value, ItemState.FAILED.value)


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

    # -- many keys at once: what an invocation attempt uses ------------------------------------------

    def admit_many(
        self, scope: str, keys: Mapping[int, str], *, window: float, item_id: int | None
    ) -> dict[int, Any]:
        """Take the keys of a batch's records in one transaction; return the duplicates' stored results.

        ``keys`` maps a record's offset to its key. A record is a duplicate, and must not run, when its
        key is live and has succeeded, or when it is live, pending and held by another unfinished item
        (a copy being processed elsewhere). A key that succeeded within this same item is a duplicate
        whatever its age: the record is already done, even if the item was dead-lettered and redriven
        after the window. Every other key (new, expired, failed, or left pending by a crashed attempt
        of this item) is taken for this item, pending, for ``window`` seconds.
        """
        if not keys:
            return {}
        now = self._store.clock.now()
        c = dedup_keys.c
        w = work_items.c
        wanted = sorted(set(keys.values()))
        duplicates: dict[str, Any] = {}
        with self._store.transaction() as connection:
            found: dict[str, Any] = {}
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                query = (
                    sa.select(c.key, c.outcome, c.expires_at, c.item_id, c.result, w.state)
                    .select_from(dedup_keys.outerjoin(work_items, w.id == c.item_id))
                    .where(c.scope == scope, c.key.in_(chunk))
                )
                if self._store.backend is Backend.POSTGRESQL:
                    query = query.with_for_update(of=dedup_keys)
                for stored in connection.execute(query):
                    found[stored.key] = stored
            take: list[str] = []
            for key in wanted:
                row = found.get(key)
                if row is None:
                    take.append(key)
                    continue
                if is_duplicate(
                    DedupOutcome(row.outcome),
                    live=row.expires_at > now or row.state == ItemState.DEAD.value,
                    same_item=item_id is not None and row.item_id == item_id,
                    holder_unfinished=row.state in _UNFINISHED,
                ):
                    duplicates[key] = row.result
                else:
                    take.append(key)
            if take:
                values = {
                    "first_seen": now,
                    "expires_at": now + timedelta(seconds=window),
                    "outcome": DedupOutcome.PENDING,
                    "result": None,
                    "item_id": item_id,
                }
                insert = self._store.dialect_insert(dedup_keys)
                connection.execute(
                    insert.on_conflict_do_update(
                        index_elements=["scope", "key"],
                        set_={name: insert.excluded[name] for name in values},
                    ),
                    [{"scope": scope, "key": key, **values} for key in take],
                )
        return {offset: duplicates[key] for offset, key in keys.items() if key in duplicates}

    def settle_many(
        self,
        scope: str,
        succeeded: Mapping[str, Any],
        failed: Sequence[str],
        *,
        connection: sa.Connection | None = None,
    ) -> None:
        """Store outcomes: ``succeeded`` maps keys to results; ``failed`` keys may be taken again."""
        if not succeeded and not failed:
            return
        c = dedup_keys.c
        statement = (
            sa.update(dedup_keys)
            .where(c.scope == sa.bindparam("b_scope"), c.key == sa.bindparam("b_key"))
            .values(outcome=sa.bindparam("b_outcome"), result=sa.bindparam("b_result", type_=JSONDocument))
        )
        rows = [
            {"b_scope": scope, "b_key": key, "b_outcome": DedupOutcome.SUCCEEDED.value, "b_result": result}
            for key, result in succeeded.items()
        ] + [
            {"b_scope": scope, "b_key": key, "b_outcome": DedupOutcome.FAILED.value, "b_result": None}
            for key in failed
        ]
        if connection is not None:
            connection.execute(statement, rows)
            return
        with self._store.transaction() as own:
            own.execute(statement, rows)

    def extend_for_items(self, item_ids: Sequence[int]) -> int:
        """Give the keys held by these items a fresh window from now (a redrive); returns how many."""
        if not item_ids:
            return 0
        now = self._store.clock.now()
        c = dedup_keys.c
        with self._store.transaction() as connection:
            rows = connection.execute(
                sa.select(c.scope, c.key, c.first_seen, c.expires_at).where(c.item_id.in_(list(item_ids)))
            ).all()
            if rows:
                connection.execute(
                    sa.update(dedup_keys)
                    .where(c.scope == sa.bindparam("b_scope"), c.key == sa.bindparam("b_key"))
                    .values(expires_at=sa.bindparam("b_expires", type_=UTCDateTime())),
                    [
                        {
                            "b_scope": row.scope,
                            "b_key": row.key,
                            "b_expires": max(row.expires_at, now + (row.expires_at - row.first_seen)),
                        }
                        for row in rows
                    ],
                )
        return len(rows)

    def held_by(self, item_ids: Sequence[int]) -> list[DedupKey]:
        """The keys attached to these items."""
        if not item_ids:
            return []
        c = dedup_keys.c
        with self._store.reading() as connection:
            return [
                _key(row)
                for row in connection.execute(
                    sa.select(dedup_keys).where(c.item_id.in_(list(item_ids))).order_by(c.scope, c.key)
                )
            ]
