"""Work items in: enqueue one, many (checked, or as JSON text already checked), or inside a transaction.

The contract (tested on SQLite and PostgreSQL by ``tests/contract``): ``enqueue`` is idempotent per
(kind, key), the same key again returns the existing item unchanged; a key given twice in one call
keeps its first payload; every payload is checked before anything is written. The rest of an item's
life (claim, heartbeat, complete, fail, reap, redrive, purge) is in ``items``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..clock import ensure_aware
from ..limits import check_kind, check_name
from .engine import DriverConnection, PostgresStatement
from .hot import HotSQL
from .hot_enqueue import EnqueueRow
from .item_checks import check_max_attempts, check_payload, checked_payloads
from .item_reads import ItemReads, item_from_row
from .item_reads import by_key as _by_key
from .records import WorkItem
from .streams import NOTIFY_CHANNEL, notify
from .url import Backend

#: Most items an enqueue writes on the driver in one go (``_enqueue_alone``); more take the chunked path.
_ALONE_MAX = 100

if TYPE_CHECKING:
    from .api import Store

__all__ = ["ItemEnqueue"]


class ItemEnqueue(ItemReads):
    """The enqueueing operations on work items (``WorkItems`` sets ``_store`` and ``_hot``)."""

    _store: Store
    _hot: HotSQL
    #: Made on first use by ``_enqueue_alone``.
    _statement: PostgresStatement | None = None
    _submit_driver: DriverConnection | None = None

    # -- enqueue ------------------------------------------------------------------------------------

    def enqueue(
        self,
        kind: str,
        payload: Any = None,
        *,
        key: str | None = None,
        max_attempts: int = 3,
        run_after: datetime | None = None,
    ) -> WorkItem:
        """Store a work item, or return the existing one with the same (kind, key).

        Without a key the item gets a random one, so enqueueing twice makes two items.
        """
        key = key if key is not None else uuid.uuid4().hex
        text = check_payload(check_kind(kind), key, payload)
        check_max_attempts(max_attempts)
        now = self._store.clock.now()
        after = ensure_aware(run_after, "run_after") if run_after is not None else now
        with self._store.transaction() as connection:
            self._hot.enqueue(connection, [(kind, key, text, max_attempts, after)], now)
            row = connection.execute(_by_key(kind, key)).one()
        return item_from_row(row)

    def enqueue_many(
        self,
        kind: str,
        items: Iterable[tuple[str, Any]],
        *,
        max_attempts: int = 3,
        run_after: datetime | None = None,
        chunk_size: int = 2_000,
    ) -> int:
        """Store many (key, payload) items of one kind, one transaction per chunk; existing keys are kept.

        Every payload is checked before anything is written, so a bad one leaves the store untouched.
        Returns how many items were new.
        """
        return len(
            self.enqueue_many_ids(kind, items, max_attempts=max_attempts, run_after=run_after, chunk_size=chunk_size)
        )

    def enqueue_many_ids(
        self,
        kind: str,
        items: Iterable[tuple[str, Any]],
        *,
        max_attempts: int = 3,
        run_after: datetime | None = None,
        chunk_size: int = 2_000,
        wake: bool = False,
    ) -> dict[str, int]:
        """``enqueue_many``, returning the id of each new item by its key (an existing key is not in it).

        The rows go in as driver SQL (``HotSQL.enqueue``), each payload as the JSON text its check
        made: one statement per chunk on PostgreSQL (arrays), a few on SQLite, where SQLAlchemy's
        executemany cost 5x more than the database (benchmarks/README.md, bench_async's enqueue). On
        SQLite they go through a pooled connection, not the driver connection of the claims: a
        submitter thread that opened that one left a worker's two threads in the same process a
        quarter slower afterwards (measured, not explained). ``wake``: on PostgreSQL, NOTIFY idle
        workers in each chunk's own transaction.
        """
        pairs = checked_payloads(kind, items)
        return self.enqueue_texts_ids(
            kind, pairs, max_attempts=max_attempts, run_after=run_after, chunk_size=chunk_size, wake=wake
        )

    def enqueue_texts_ids(
        self,
        kind: str,
        pairs: Sequence[tuple[str, str]],
        *,
        max_attempts: int = 3,
        run_after: datetime | None = None,
        chunk_size: int = 2_000,
        wake: bool = False,
        queue: str = "default",
    ) -> dict[str, int]:
        """``enqueue_many_ids`` of (key, payload JSON text) pairs whose keys and texts are checked already
        (``item_checks.check_payload``, or ``Invoker``'s call payloads): each payload is encoded once,
        by its check. A key given twice keeps its first payload. ``queue``: the items' named queue."""
        check_kind(kind)
        check_name(queue, "a queue name")
        check_max_attempts(max_attempts)
        now = self._store.clock.now()
        after = ensure_aware(run_after, "run_after") if run_after is not None else now
        if len(dict(pairs)) != len(pairs):
            first: dict[str, str] = {}
            for key, text in pairs:
                first.setdefault(key, text)
            pairs = list(first.items())
        if len(pairs) <= min(chunk_size, _ALONE_MAX):
            return self._enqueue_alone(kind, pairs, max_attempts, after, now, wake, queue)
        ids: dict[str, int] = {}
        for start in range(0, len(pairs), chunk_size):
            with self._store.transaction() as connection:
                chunk = pairs[start : start + chunk_size]
                made = self._hot.enqueue_kind(connection, kind, chunk, max_attempts, after, now, queue)
                ids.update((key, item_id) for _kind, key, item_id in made)
                if wake:
                    notify(connection, self._store.backend, kind)
        return ids

    def _enqueue_alone(
        self, kind: str, pairs: Sequence[tuple[str, str]], max_attempts: int, after: datetime, now: datetime,
        wake: bool, queue: str,
    ) -> dict[str, int]:
        """A small enqueue, a transaction of its own, on the driver (a single submit is the common case).

        SQLAlchemy's transaction costs more than the insert itself here: SQLite runs it on a driver
        connection of its own (not the claims' one, see ``enqueue_many_ids``), PostgreSQL as one
        autocommit statement with the wake-up folded in (``PostgresStatement``).
        """
        runner: PostgresStatement | DriverConnection
        if self._store.backend is Backend.POSTGRESQL:
            if self._statement is None:
                self._statement = PostgresStatement(self._store.engine, self._store.target)
            runner = self._statement
        else:
            if self._submit_driver is None:
                self._submit_driver = DriverConnection(self._store.engine, self._store.target)
            runner = self._submit_driver
        channel = NOTIFY_CHANNEL if wake else None
        made = runner.run(self._hot.enqueue_kind, kind, pairs, max_attempts, after, now, queue, channel)
        return {key: item_id for _kind, key, item_id in made}

    def enqueue_in(
        self, connection: sa.Connection, items: Iterable[tuple[str, str, Any, int, datetime]], now: datetime
    ) -> list[tuple[str, str, int]]:
        """Store (kind, key, payload, max_attempts, run_after) items of any kinds inside the caller's
        transaction (the scheduler's, which moves its cursors in the same one); an existing (kind, key)
        is kept, and a repeated one counts once. Returns (kind, key, id) of the new items."""
        rows: dict[tuple[str, str], EnqueueRow] = {}
        for kind, key, payload, max_attempts, run_after in items:
            if (kind, key) not in rows:
                check_kind(kind)
                check_max_attempts(max_attempts)
                after = ensure_aware(run_after, "run_after")
                rows[(kind, key)] = (kind, key, check_payload(kind, key, payload), max_attempts, after)
        return self._hot.enqueue(connection, list(rows.values()), now)
