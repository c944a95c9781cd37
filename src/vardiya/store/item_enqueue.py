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
#: Items of one transaction in a bulk enqueue when the caller names no chunk size: the statement binds
#: arrays (SQLite a few statements of 256), so 2,000; COPY streams its rows, so more go in one
#: transaction (one commit, one wake-up and one id query where 2,000 a chunk made five of each:
#: benchmarks/README.md, "fifth step").
DEFAULT_CHUNK = 2_000
COPY_CHUNK = 10_000
#: Most combinations ``_check_shared`` remembers before it starts again.
_CHECKED_MAX = 256

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
    #: The (kind, queue, max_attempts) combinations ``_check_shared`` has passed (``WorkItems`` sets it).
    _checked: set[tuple[str, str, int]]

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
            row = connection.execute(_by_key(self._store.backend, kind, key)).one()
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
        chunk_size: int | None = None,
        wake: bool = False,
        queue: str = "default",
        fresh_keys: bool = False,
    ) -> dict[str, int]:
        """``enqueue_many_ids`` of (key, payload JSON text) pairs whose keys and texts are checked already
        (``item_checks.check_payload``, or ``Invoker``'s call payloads): each payload is encoded once,
        by its check. A key given twice keeps its first payload. ``queue``: the items' named queue.

        ``fresh_keys``: the keys are random ones no item is expected to have (``Invoker``'s, for
        records given no key). A bulk enqueue on PostgreSQL then writes by COPY
        (``HotSQL.copy_fresh``), and by the statement if a key existed after all: the same result.
        ``chunk_size``: items per transaction (None: ``COPY_CHUNK`` when it writes by COPY, else
        ``DEFAULT_CHUNK``)."""
        self._check_shared(kind, queue, max_attempts)
        copy = fresh_keys and self._store.backend is Backend.POSTGRESQL
        if chunk_size is None:
            chunk_size = COPY_CHUNK if copy else DEFAULT_CHUNK
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
                made = None
                if copy:
                    made = self._hot.copy_fresh(connection, kind, chunk, max_attempts, after, now, queue)
                if made is None:
                    made = self._hot.enqueue_kind(connection, kind, chunk, max_attempts, after, now, queue)
                ids.update((key, item_id) for _kind, key, item_id in made)
                if wake:
                    notify(connection, self._store.backend, kind)
        return ids

    def enqueue_text_id(
        self, kind: str, key: str, text: str, *, max_attempts: int = 3, wake: bool = False, queue: str = "default"
    ) -> int:
        """One item of ``enqueue_texts_ids`` (its key and text checked already), due now: the id of the
        new item, or of the existing one with the same (kind, key). A single submit; the fewest steps
        that keep the contract (the key, one transaction, the wake-up)."""
        self._check_shared(kind, queue, max_attempts)
        now = self._store.clock.now()
        made = self._enqueue_alone(kind, ((key, text),), max_attempts, now, now, wake, queue)
        if made:
            return made[key]
        existing = self._store.invocations.ids_by_key(kind, [key])
        return existing[key]

    def _check_shared(self, kind: str, queue: str, max_attempts: int) -> None:
        """Check what the items of one enqueue share; a combination seen before is not checked again
        (a process submits to a few handlers, thousands of times)."""
        shared = (kind, queue, max_attempts)
        if shared in self._checked:
            return
        check_kind(kind)
        check_name(queue, "a queue name")
        check_max_attempts(max_attempts)
        if len(self._checked) >= _CHECKED_MAX:
            self._checked.clear()
        self._checked.add(shared)

    def _enqueue_alone(
        self, kind: str, pairs: Sequence[tuple[str, str]], max_attempts: int, after: datetime, now: datetime,
        wake: bool, queue: str,
    ) -> dict[str, int]:
        """A small enqueue, a transaction of its own, on the driver (a single submit is the common case).

        SQLAlchemy's transaction costs more than the insert itself here: SQLite runs it on a driver
        connection of its own (not the claims' one, see ``enqueue_many_ids``), PostgreSQL as one
        autocommit statement with the wake-up folded in (``PostgresStatement``).
        """
        if self._store.backend is Backend.POSTGRESQL:
            if self._statement is None:
                self._statement = PostgresStatement(self._store.engine, self._store.target)
            channel = NOTIFY_CHANNEL if wake else None
            made = self._statement.run(self._hot.enqueue_kind, kind, pairs, max_attempts, after, now, queue, channel)
        else:
            # One statement in autocommit: the commit changes the file's data_version, which is what
            # wakes SQLite's idle workers.
            if self._submit_driver is None:
                self._submit_driver = DriverConnection(self._store.engine, self._store.target)
            made = self._submit_driver.statement(
                *self._hot.sqlite_enqueue_statement(kind, pairs, max_attempts, after, now, queue)
            )
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
