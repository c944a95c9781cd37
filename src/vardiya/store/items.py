"""Work items: claim with a lease, heartbeat, complete, fail, reap, redrive, purge (enqueue: ``item_enqueue``).

The contract (tested on SQLite and PostgreSQL by ``tests/contract``):

- ``enqueue`` is idempotent per (kind, key): the same key again returns the existing item, unchanged.
- ``claim`` hands each ready item to one owner at a time. Claiming counts the attempt, and the item is
  marked started (``start=k`` marks only the first k; ``start`` marks more as a worker reaches them),
  so a worker that dies while an item's handler runs has spent one: an item that kills its worker
  every time ends ``dead``. An item it had only prefetched (never started) is not charged.
- ``complete``, ``fail`` and ``heartbeat`` act only on items the owner still holds (state ``running``,
  same ``lease_owner``); the ids it no longer holds come back as "lost" and nothing is written for them.
- A lease that runs out is reaped: a started item's attempt is recorded as ``lease_expired`` and the
  item becomes claimable again, or ``dead`` when no attempt is left; an item never started goes back
  to ready as if never claimed (its attempt not counted, no history row). Claims reap before they
  select.
- Every attempt that ends leaves a row in the item's history; dead items keep payload and history.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..clock import ensure_aware
from ..errors import InvalidInput, LeaseLost
from .engine import DriverConnection, PostgresStatement
from .hot import Statements, complete_counting, complete_returning, hot_sql, run_statements
from .item_checks import check_max_attempts, lease_seconds
from .item_enqueue import ItemEnqueue
from .rate_buckets import ClaimLimit, limited_claim
from .records import AttemptOutcome, ItemState, WorkItem
from .schema import attempts as attempts_table
from .schema import work_item_keys, work_items
from .types import UTCMicros, dumps_json
from .url import Backend

if TYPE_CHECKING:
    from .api import Store

__all__ = ["WorkItems"]

_LEASE_EXPIRED_ERROR = (
    sa.literal("lease expired: worker ") + work_items.c.lease_owner + sa.literal(" stopped before finishing")
)

#: How often (in clock seconds) claims look for expired leases.
REAP_INTERVAL_S = 1.0


def _lease_expired_error(owner: str | None) -> str | None:
    """``_LEASE_EXPIRED_ERROR`` of one item (NULL without an owner, as the SQL concatenation is)."""
    return None if owner is None else f"lease expired: worker {owner} stopped before finishing"


def _rows(result: sa.CursorResult[Any]) -> list[Any]:
    """The rows of a driver statement's result; none for one that returns no rows (an INSERT, an UPDATE)."""
    return list(result.fetchall()) if result.returns_rows else []


def _unattempted(now: datetime) -> dict[str, Any]:
    """The values that give a claimed item back as if it had never been claimed (its attempt uncounted):
    a draining worker's release, and the reap of an item whose handler never started."""
    return {
        "state": ItemState.PENDING,
        "attempts": work_items.c.attempts - 1,
        "started": False,
        "lease_owner": None,
        "lease_until": None,
        "claimed_at": None,
        "updated_at": now,
    }


def _append_history(connection: sa.Connection, ended: Sequence[tuple[Any, datetime, AttemptOutcome, str | None]]) -> None:
    """History rows for (item row with id, attempts, lease_owner, claimed_at; end; outcome; error).

    Written from Python, not by ``INSERT ... SELECT``: on SQLite the item's times are ``UTCMicros``
    integers and the history keeps ``UTCDateTime`` text, so a row cannot be copied across as it is.
    """
    if ended:
        connection.execute(
            attempts_table.insert(),
            [
                {
                    "item_id": row.id, "attempt": row.attempts, "owner": row.lease_owner,
                    "started_at": row.claimed_at, "ended_at": end, "outcome": outcome, "error": error,
                }
                for row, end, outcome, error in ended
            ],
        )


class WorkItems(ItemEnqueue):
    """The work-item operations of one store (enqueues are in ``item_enqueue``, reads in ``item_reads``)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._hot = hot_sql(store.backend)
        self._checked = set()
        # SQLite claims and completions run on the driver connection (see DriverConnection).
        self._driver = DriverConnection(store.engine, store.target) if store.backend is Backend.SQLITE else None
        #: PostgreSQL: the autocommit connection of the one-statement claims and completions (made at first use)
        self._statements: PostgresStatement | None = None
        self._next_reap_at: datetime | None = None
        self._usual_kind: str | None = None

    # -- claim, heartbeat ---------------------------------------------------------------------------

    def claim(
        self,
        n: int,
        *,
        owner: str,
        lease: float | timedelta,
        kinds: Sequence[str] | None = None,
        start: int | None = None,
        exclude: Collection[str] = (),
        queues: Sequence[str] | None = None,
        limits: Mapping[str, ClaimLimit] | None = None,
    ) -> list[WorkItem]:
        """Take up to ``n`` ready items for ``owner``, leased for ``lease``; oldest ``run_after`` first.

        ``exclude``: kinds left where they are (what is paused); they narrow ``kinds``, which a claim
        that excludes must give (nothing is claimed when every kind is excluded).

        ``start``: how many of them, in the order returned, are marked started by the claim (default
        all: a caller runs what it claims). A worker that prefetches marks the first few and the rest
        with ``start`` as it reaches them, so that its crash charges only what was running.
        ``queues``: only items of those named queues (default: every queue). ``limits``: per kind, the
        token bucket its items take from (``rate_buckets``); needs ``kinds``. Items over a limit stay
        ready, uncharged.
        """
        if exclude:
            if kinds is None:
                raise InvalidInput("a claim that excludes kinds must name the kinds it claims")
            kinds = [kind for kind in kinds if kind not in exclude]
            if not kinds:
                return []
        if limits:
            if not kinds:
                raise InvalidInput("a rate-limited claim needs the kinds it claims (kinds=...)")
            limits = {kind: limit for kind, limit in limits.items() if kind in kinds}
        if n <= 0:
            return []
        if start is not None and (isinstance(start, bool) or not isinstance(start, int) or start < 0):
            raise InvalidInput(f"start must be a whole number of at least 0, got {start!r}")
        now = self._store.clock.now()
        until = now + timedelta(seconds=lease_seconds(lease))
        reap = self._next_reap_at is None or now >= self._next_reap_at
        if self._driver is not None:
            # The reap runs through SQLAlchemy, in its own transaction just before the claim's.
            if reap:
                with self._store.transaction() as connection:
                    self._reap(connection, now)
                self._next_reap_at = now + timedelta(seconds=REAP_INTERVAL_S)
            if limits:
                items = self._driver.run(
                    self._sqlite_limited, n, list(kinds or ()), queues, limits, owner, now, until, start
                )
            else:
                items = self._driver.run(
                    self._hot.sqlite_claim, n, kinds, owner, now, until, self._usual_kind, start, queues
                )
            if items:
                self._usual_kind = items[-1].kind  # the next claim's guess (see HotSQL.sqlite_claim)
            return items
        if not reap and not limits:
            # The common claim is one statement: in autocommit, a transaction of its own (see
            # ``complete_many``); a reap or a rate limit takes more, in one transaction below.
            statement, parameters = self._hot.claim(n, kinds, owner, now, until, n if start is None else start, queues)
            rows = self._worker_statements().run(_fetched, statement, parameters)
            return self._hot.claimed(rows, owner, now, until)
        with self._store.transaction() as connection:
            if reap:
                self._reap(connection, now)
                self._next_reap_at = now + timedelta(seconds=REAP_INTERVAL_S)
            marked = [n if start is None else start]  # how many more the sub-claims mark started

            def claim_rows(size: int, some: Sequence[str] | None) -> list[WorkItem]:
                statement, parameters = self._hot.claim(size, some, owner, now, until, marked[0], queues)
                claimed = self._hot.claimed(connection.exec_driver_sql(statement, parameters).fetchall(), owner, now, until)
                marked[0] = max(0, marked[0] - len(claimed))
                return claimed

            if not limits:
                return claim_rows(n, kinds)
            return limited_claim(
                self._store.backend,
                lambda statement, parameters: _rows(connection.exec_driver_sql(statement, parameters)),
                claim_rows, n, list(kinds or ()), limits, now, self._hot.item_time,
            )

    def _sqlite_limited(
        self,
        cursor: sqlite3.Cursor,
        n: int,
        kinds: list[str],
        queues: Sequence[str] | None,
        limits: Mapping[str, ClaimLimit],
        owner: str,
        now: datetime,
        until: datetime,
        start: int | None,
    ) -> list[WorkItem]:
        """A rate-limited claim on SQLite's driver cursor, inside the claim's ``BEGIN IMMEDIATE``."""
        marked = [n if start is None else start]

        def claim_rows(size: int, some: Sequence[str]) -> list[WorkItem]:
            claimed = self._hot.sqlite_claim(cursor, size, some, owner, now, until, self._usual_kind, marked[0], queues)
            marked[0] = max(0, marked[0] - len(claimed))
            return claimed

        return limited_claim(
            Backend.SQLITE,
            lambda statement, parameters: cursor.execute(statement, parameters).fetchall(),
            claim_rows, n, kinds, limits, now, self._hot.item_time,
        )

    def start(self, ids: Sequence[int], *, owner: str) -> None:
        """Mark held items started: their handler is about to run, so a crash from now on is charged
        to them as an attempt. One statement for all of them (a worker marks its prefetched items a
        chunk at a time, ``invoke.pacing``); ids ``owner`` no longer holds are left alone."""
        if not ids:
            return
        statements = self._hot.start_statements(ids, owner)
        if self._driver is not None:
            self._driver.run(run_statements, statements)
            return
        with self._store.transaction() as connection:
            for statement, parameters in statements:
                connection.exec_driver_sql(statement, parameters)

    def heartbeat(self, ids: Sequence[int], *, owner: str, lease: float | timedelta) -> set[int]:
        """Extend the leases ``owner`` holds on ``ids``; returns the ids it did not extend.

        Those are the ids it no longer holds and, on PostgreSQL, any being ended by another transaction
        at that moment: the heartbeat skips rows locked by a completion instead of waiting for them, so
        it never waits in a cycle with one (a completion locks its rows in id order, a reap skips
        locked rows too). An item skipped is either ended a moment later or extended by the next beat.
        """
        now = self._store.clock.now()
        until = now + timedelta(seconds=lease_seconds(lease))
        held = self._held(ids, owner)
        if self._store.backend is Backend.POSTGRESQL:
            c = work_items.c
            held = c.id.in_(sa.select(c.id).where(held).with_for_update(skip_locked=True).scalar_subquery())
        with self._store.transaction() as connection:
            extended = connection.execute(
                sa.update(work_items).where(held).values(lease_until=until, updated_at=now).returning(work_items.c.id)
            ).scalars()
            return set(ids) - set(extended)

    # -- outcomes -----------------------------------------------------------------------------------

    def complete(self, item_id: int, *, owner: str, result: Any = None) -> None:
        """Record success of an item ``owner`` holds; ``LeaseLost`` if it no longer holds it."""
        lost = self.complete_many([item_id], owner=owner, results={item_id: result} if result is not None else None)
        if lost:
            raise LeaseLost(f"work item {item_id} is no longer held by {owner}; its result was not recorded")

    def complete_many(
        self,
        ids: Sequence[int],
        *,
        owner: str,
        results: Mapping[int, Any] | None = None,
        busy: Mapping[int, float] | None = None,
    ) -> set[int]:
        """Record success of many items in one transaction; returns the ids ``owner`` no longer holds.

        ``results``: what an item's handler returned (stored as its result); ``busy``: how long the
        handler of a successful async call ran, in ms (``work_items.busy_ms``).
        """
        if not ids:
            return set()
        if self._driver is not None:
            return self.complete_on_driver(ids, owner, results=results, busy=busy)
        # PostgreSQL's completion is one statement: in autocommit, a transaction of its own (its NOTIFY
        # delivered at its commit), one round trip where BEGIN, the statement and COMMIT were three.
        (completion,) = self._completion(list(dict.fromkeys(ids)), owner, self._store.clock.now(), results, busy, returning=True)
        return set(ids) - self._worker_statements().run(lambda cursor: _held_ids(cursor.execute, [completion]))

    def _worker_statements(self) -> PostgresStatement:
        """PostgreSQL's autocommit statements of claims and completions; the store's custom plans kept
        (a claim's best plan depends on what is ready)."""
        if self._statements is None:
            self._statements = PostgresStatement(self._store.engine, self._store.target, generic=False)
        return self._statements

    def complete_on_driver(
        self,
        ids: Sequence[int],
        owner: str,
        *,
        results: Mapping[int, Any] | None = None,
        busy: Mapping[int, float] | None = None,
        then: Callable[[sqlite3.Cursor, set[int]], None] | None = None,
    ) -> set[int]:
        """``complete_many`` on SQLite's driver connection; ``then(cursor, lost)`` writes more in the same
        transaction. The changed rows are counted, and only when some were lost is it asked which."""
        assert self._driver is not None
        now = self._store.clock.now()
        counting = self._completion(ids, owner, now, results, busy, returning=False)
        if self._driver.run(complete_counting, counting, ids, then):
            return set()
        # some items were no longer held: that transaction was rolled back; redo it learning which
        returning = self._completion(ids, owner, now, results, busy, returning=True)
        return self._driver.run(complete_returning, returning, ids, then)

    def _completion(
        self,
        ids: Sequence[int],
        owner: str,
        now: datetime,
        results: Mapping[int, Any] | None,
        busy: Mapping[int, float] | None,
        *,
        returning: bool,
    ) -> Statements:
        """The statements that mark ``ids`` succeeded, with their results and busy times when given."""
        if not results and not busy:
            return self._hot.complete_statements(ids, owner, now, returning=returning)
        ids = list(ids)
        times: list[float | None] = [busy.get(item_id) for item_id in ids] if busy else [None] * len(ids)
        texts: list[str | None] = [None] * len(ids)
        if results:
            texts = [None if (result := results.get(item_id)) is None else dumps_json(result) for item_id in ids]
        return self._hot.complete_timed_statements(ids, times, texts, owner, now, returning=returning)

    def complete_in(
        self,
        connection: sa.Connection,
        ids: Sequence[int],
        *,
        owner: str,
        results: Mapping[int, Any] | None = None,
        busy: Mapping[int, float] | None = None,
    ) -> set[int]:
        """``complete_many`` inside the caller's transaction (so more can commit with it)."""
        if not ids:
            return set()
        statements = self._completion(list(dict.fromkeys(ids)), owner, self._store.clock.now(), results, busy, returning=True)
        return set(ids) - _held_ids(connection.exec_driver_sql, statements)

    def fail(
        self,
        item_id: int,
        *,
        owner: str,
        error: str,
        retry_at: datetime | None = None,
        traceback: str | None = None,
    ) -> ItemState:
        """Record a failed attempt: retried at ``retry_at`` while attempts are left, else ``dead``.

        Without ``retry_at`` the failure is final and the item goes dead at once. Returns the new state;
        ``LeaseLost`` if ``owner`` no longer holds the item. The history row keeps ``traceback``.
        """
        states = self.fail_many([item_id], owner=owner, error=error, retry_at=retry_at, traceback=traceback)
        if item_id not in states:
            raise LeaseLost(f"work item {item_id} is no longer held by {owner}; its failure was not recorded")
        return states[item_id]

    def fail_many(
        self,
        ids: Sequence[int],
        *,
        owner: str,
        error: str,
        retry_at: datetime | None = None,
        traceback: str | None = None,
    ) -> dict[int, ItemState]:
        """Record the same failure for many held items; returns the new state of each item still held."""
        if not ids:
            return {}
        now = self._store.clock.now()
        c = work_items.c
        if retry_at is None:
            next_state: Any = sa.literal(ItemState.DEAD.value)
            run_after: Any = c.run_after
        else:
            retry_at = ensure_aware(retry_at, "retry_at")
            next_state = sa.case(
                (c.attempts >= c.max_attempts, sa.literal(ItemState.DEAD.value)),
                else_=sa.literal(ItemState.FAILED.value),
            )
            run_after = sa.case(
                (c.attempts >= c.max_attempts, c.run_after), else_=sa.literal(retry_at, UTCMicros())
            )
        with self._store.transaction() as connection:
            self._record_attempts(connection, ids, owner, now, AttemptOutcome.FAILED, error)
            self._store.failures.keep_attempt_traceback(connection, ids, traceback)
            rows = connection.execute(
                sa.update(work_items)
                .where(self._held(ids, owner))
                .values(
                    state=next_state,
                    run_after=run_after,
                    lease_owner=None,
                    lease_until=None,
                    last_error=error,
                    updated_at=now,
                )
                .returning(c.id, c.state)
            ).all()
        return {row.id: ItemState(row.state) for row in rows}

    def release(self, ids: Sequence[int], *, owner: str) -> set[int]:
        """Give held items back unattempted (a draining worker): the claim's attempt is not counted.

        Returns the ids ``owner`` no longer holds.
        """
        if not ids:
            return set()
        now = self._store.clock.now()
        c = work_items.c
        with self._store.transaction() as connection:
            held = connection.execute(
                sa.update(work_items)
                .where(self._held(ids, owner))
                .values(**_unattempted(now), run_after=now)
                .returning(c.id)
            ).scalars()
            return set(ids) - set(held)

    # -- leases -------------------------------------------------------------------------------------

    def reap(self) -> int:
        """Return items whose lease ran out to the ready set (or to ``dead``); returns how many."""
        now = self._store.clock.now()
        with self._store.transaction() as connection:
            return self._reap(connection, now)

    def _reap(self, connection: sa.Connection, now: datetime) -> int:
        """Items whose lease ran out: a started one is charged the attempt (history, then retry or
        dead), one never started goes back to ready uncharged, in its old place (its ``run_after``)."""
        c = work_items.c
        expired = sa.select(c.id, c.attempts, c.lease_owner, c.claimed_at, c.lease_until, c.started).where(
            c.state == ItemState.RUNNING, c.lease_until < now
        )
        if self._store.backend is Backend.POSTGRESQL:
            expired = expired.with_for_update(skip_locked=True)
        rows = connection.execute(expired).all()
        if not rows:
            return 0
        unstarted = [row.id for row in rows if not row.started]
        if unstarted:
            connection.execute(sa.update(work_items).where(c.id.in_(unstarted)).values(**_unattempted(now)))
        rows = [row for row in rows if row.started]
        if not rows:
            return len(unstarted)
        _append_history(
            connection,
            [(row, row.lease_until, AttemptOutcome.LEASE_EXPIRED, _lease_expired_error(row.lease_owner)) for row in rows],
        )
        ids = [row.id for row in rows]
        connection.execute(
            sa.update(work_items)
            .where(c.id.in_(ids))
            .values(
                state=sa.case(
                    (c.attempts >= c.max_attempts, sa.literal(ItemState.DEAD.value)),
                    else_=sa.literal(ItemState.FAILED.value),
                ),
                last_error=_LEASE_EXPIRED_ERROR,
                run_after=now,
                lease_owner=None,
                lease_until=None,
                updated_at=now,
            )
        )
        return len(ids) + len(unstarted)

    # -- dead items ---------------------------------------------------------------------------------

    def redrive(
        self, ids: Sequence[int], *, max_attempts: int | None = None, spacing_s: float = 0.0
    ) -> int:
        """Make dead items ready again with a fresh set of attempts; their history is kept.

        ``spacing_s`` spreads them out (a rate limit): the k-th item, in id order, becomes ready
        ``k * spacing_s`` seconds from now.
        """
        if max_attempts is not None:
            check_max_attempts(max_attempts)
        if isinstance(spacing_s, bool) or not isinstance(spacing_s, int | float) or spacing_s < 0:
            raise InvalidInput(f"redrive spacing must be 0 or more seconds, got {spacing_s!r}")
        now = self._store.clock.now()
        c = work_items.c
        values: dict[str, Any] = {"state": ItemState.PENDING, "attempts": 0, "updated_at": now}
        if max_attempts is not None:
            values["max_attempts"] = max_attempts
        ordered = sorted(set(ids))
        if not ordered:
            return 0
        statement = (
            sa.update(work_items)
            .where(c.id == sa.bindparam("b_id"), c.state == ItemState.DEAD)
            .values({**values, "run_after": sa.bindparam("b_run_after", type_=UTCMicros())})
        )
        with self._store.transaction() as connection:
            # Only dead items are redriven; find (and on PostgreSQL lock) them first, since an
            # executemany cannot say how many rows it changed on every driver.
            dead: list[int] = []
            for start in range(0, len(ordered), 1_000):
                query = sa.select(c.id).where(
                    c.id.in_(ordered[start : start + 1_000]), c.state == ItemState.DEAD
                ).order_by(c.id)
                if self._store.backend is Backend.POSTGRESQL:
                    query = query.with_for_update()
                dead.extend(connection.execute(query).scalars())
            for start in range(0, len(dead), 1_000):
                connection.execute(statement, [
                    {"b_id": item_id, "b_run_after": now + timedelta(seconds=spacing_s * (start + k))}
                    for k, item_id in enumerate(dead[start : start + 1_000])
                ])
            return len(dead)

    def purge(self, ids: Sequence[int]) -> int:
        """Delete dead items (with their history and their keys, which may then be used again; on
        PostgreSQL the key rows go with them); other states are left alone."""
        c = work_items.c
        k = work_item_keys.c
        purged = 0
        with self._store.transaction() as connection:
            for start in range(0, len(ids), 500):
                chunk = list(ids[start : start + 500])
                gone = connection.execute(
                    sa.delete(work_items)
                    .where(c.id.in_(chunk), c.state == ItemState.DEAD)
                    .returning(c.kind, c.key)
                ).all()
                if gone and self._store.backend is Backend.POSTGRESQL:  # SQLite's key is the item row
                    connection.execute(
                        sa.delete(work_item_keys).where(sa.tuple_(k.kind, k.key).in_([tuple(row) for row in gone]))
                    )
                purged += len(gone)
        return purged

    # -- helpers ------------------------------------------------------------------------------------

    @staticmethod
    def _held(ids: Sequence[int], owner: str) -> sa.ColumnElement[bool]:
        c = work_items.c
        return sa.and_(c.id.in_(list(ids)), c.state == ItemState.RUNNING, c.lease_owner == owner)

    def _lock_held(self, connection: sa.Connection, ids: Sequence[int], owner: str) -> None:
        """Lock the held rows first, waiting for a concurrent reap to commit (PostgreSQL).

        What follows must read the rows as the item update will find them, or a reaped item gets a
        second, stale attempt row.
        """
        c = work_items.c
        connection.execute(sa.select(c.id).where(self._held(ids, owner)).order_by(c.id).with_for_update()).all()

    def _record_attempts(
        self,
        connection: sa.Connection,
        ids: Sequence[int],
        owner: str,
        now: datetime,
        outcome: AttemptOutcome,
        error: str | None,
    ) -> None:
        """Append the ending attempt of each held item to its history (before the item row changes)."""
        c = work_items.c
        if self._store.backend is Backend.POSTGRESQL:
            self._lock_held(connection, ids, owner)
        held = connection.execute(
            sa.select(c.id, c.attempts, c.lease_owner, c.claimed_at).where(self._held(ids, owner))
        ).all()
        _append_history(connection, [(row, now, outcome, error) for row in held])


def _held_ids(execute: Callable[..., Any], statements: Statements) -> set[int]:
    """The ids the completion ``statements`` changed (their first column), each run by ``execute`` (a
    SQLAlchemy connection's ``exec_driver_sql`` or a driver cursor's ``execute``)."""
    return {row[0] for statement, parameters in statements for row in execute(statement, parameters)}


def _fetched(cursor: Any, statement: str, parameters: tuple[Any, ...]) -> list[Any]:
    """The rows of one statement run on a driver cursor."""
    return cursor.execute(statement, parameters).fetchall()
