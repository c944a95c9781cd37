"""Reading the invocation tables: the call log of handlers, dead letters, and items by their keys.

``Invocations`` (``invocations.py``) inherits these; ``Store.invocations`` is the way in. The metrics,
the dead-letter commands and the ``Invoker``'s handles read through them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa

from ..rules.calls import CallOutcome
from .handler_figures import HandlerFigureReads
from .records import ItemState
from .schema import invocation_calls, work_item_keys, work_items
from .url import Backend

if TYPE_CHECKING:
    from .api import Store

__all__ = ["DeadItem", "InvocationReads", "LoggedCall"]

_KEY_CHUNK = 1_000


class LoggedCall(NamedTuple):
    """One logged handler call of an item, as ``vardiya dlq show`` lists it."""

    attempt: int
    started_at: datetime
    ended_at: datetime
    busy_ms: float
    records: int
    failed: int
    outcome: CallOutcome
    error: str | None


class DeadItem(NamedTuple):
    """A dead work item as the dead-letter listing reads it."""

    id: int
    kind: str
    payload: Any
    result: Any
    attempts: int
    last_error: str | None
    created_at: datetime
    updated_at: datetime


class InvocationReads(HandlerFigureReads):
    """The reading operations on the invocation tables of one store."""

    _store: Store

    def calls_of(self, item_id: int) -> list[LoggedCall]:
        """The logged calls of one item, in the order they were made."""
        q = invocation_calls.c
        with self._store.reading() as connection:
            return [
                LoggedCall(*row[:6], CallOutcome(row.outcome), row.error)
                for row in connection.execute(
                    sa.select(q.attempt, q.started_at, q.ended_at, q.busy_ms, q.records, q.failed, q.outcome, q.error)
                    .where(q.item_id == item_id)
                    .order_by(q.id)
                )
            ]

    def dead_items(
        self,
        *,
        kinds: Collection[str] | None = None,
        prefixes: Sequence[str] = (),
        dead_by: datetime | None = None,
        error: str | None = None,
        ids: Sequence[int] | None = None,
        limit: int | None = None,
    ) -> list[DeadItem]:
        """Dead items, oldest first: of ``kinds`` (else of a kind starting with one of ``prefixes``), dead
        since ``dead_by`` or earlier, whose error contains ``error`` (literally), among ``ids``."""
        c = work_items.c
        columns = (c.id, c.kind, c.payload, c.result, c.attempts, c.last_error, c.created_at, c.updated_at)
        query = sa.select(*columns).where(c.state == ItemState.DEAD)
        if kinds is not None:
            query = query.where(c.kind.in_(list(kinds)))
        else:
            query = query.where(sa.or_(*(c.kind.startswith(prefix) for prefix in prefixes)))
        if dead_by is not None:
            query = query.where(c.updated_at <= dead_by)
        if error:
            query = query.where(c.last_error.contains(error, autoescape=True))
        if ids is not None:
            query = query.where(c.id.in_(list(ids)))
        query = query.order_by(c.updated_at, c.id)
        if limit is not None:
            query = query.limit(limit)
        with self._store.reading() as connection:
            return [DeadItem(*row) for row in connection.execute(query)]

    def ids_by_key(self, kind: str, keys: Sequence[str]) -> dict[str, int]:
        """The ids of the items of ``kind`` with these keys (keys no item has are left out): from the key
        rows on PostgreSQL, from the items' own unique (kind, key) index on SQLite (migration 0015)."""
        if self._store.backend is Backend.SQLITE:
            table, kind_column, key_column, id_column = work_items, work_items.c.kind, work_items.c.key, work_items.c.id
        else:
            k = work_item_keys.c
            table, kind_column, key_column, id_column = work_item_keys, k.kind, k.key, k.item_id
        found: dict[str, int] = {}
        with self._store.reading() as connection:
            for start in range(0, len(keys), _KEY_CHUNK):
                chunk = keys[start : start + _KEY_CHUNK]
                rows = connection.execute(
                    sa.select(key_column, id_column).select_from(table).where(kind_column == kind, key_column.in_(chunk))
                )
                found.update((key, item_id) for key, item_id in rows)
        return found
