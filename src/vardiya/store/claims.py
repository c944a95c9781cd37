"""Record claims: which run of a slot job holds which records right now (``ledger_claims``).

The ledger only knows outcomes, so two runs of one (job, period, slot) at once (the :01 run still going
when the :31 run starts, two ``vardiya tick`` processes, two workers) would both hand every not-done
record to the handler. A run therefore claims each chunk of records before the handler sees them:

- ``take`` is one transaction per chunk: it inserts a claim (owner, lease) for every record of the
  chunk that the ledger does not have as settled, and takes over a claim whose lease ran out (its run
  died); a record that another run holds with a live lease is left to that run. SQLite runs it inside
  ``BEGIN IMMEDIATE`` (no other writer between the ledger check and the insert). PostgreSQL runs an
  ``INSERT ... ON CONFLICT DO UPDATE ... WHERE`` (a held row is locked and left as it is), then checks
  the ledger again in a new statement: a run that marked a record done and released it after this
  transaction's snapshot was taken but before it reached the claim row must not lose its outcome to a
  second handler call.
- ``renew`` (the runner's heartbeat) moves the leases of one owner's chunk forward while it runs.
- ``release`` deletes one owner's claims on a chunk; the runner does it in the transaction that marks
  the chunk's outcomes, so a record is never free and not done at once.

On PostgreSQL every statement that locks several claim rows locks them in key order (all of them bind
their keys sorted and reach the rows through the primary key), so two runs wait for each other instead
of deadlocking.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from .backend import times_of
from .records import LedgerStatus
from .schema import ledger_claims
from .url import Backend

if TYPE_CHECKING:
    from .api import Store

__all__ = ["RecordClaims"]

_DONE = f"'{LedgerStatus.DONE.value}'"

#: ``attempts >= this`` never holds: the "given up" test when a job gives up on nothing.
_NEVER = 2**31 - 1

_SQLITE_TAKE = f"""
INSERT INTO ledger_claims (job, period, record, owner, lease_until)
SELECT ?1, ?2, k.value, ?3, ?4 FROM json_each(?5) AS k
 WHERE NOT EXISTS (SELECT 1 FROM ledger AS l WHERE l.job = ?1 AND l.period = ?2 AND l.record = k.value
                      AND (l.status = {_DONE} OR l.attempts >= ?6))
ON CONFLICT (job, period, record) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until
 WHERE ledger_claims.lease_until <= ?7 OR ledger_claims.owner = excluded.owner
RETURNING record
"""

_POSTGRES_TAKE = f"""
INSERT INTO ledger_claims AS c (job, period, record, owner, lease_until)
SELECT %(job)s::varchar, %(period)s::varchar, k.record, %(owner)s::varchar, %(until)s::timestamptz
  FROM unnest(%(keys)s::varchar[]) AS k (record)
 WHERE NOT EXISTS (SELECT 1 FROM ledger AS l WHERE l.job = %(job)s::varchar AND l.period = %(period)s::varchar
                      AND l.record = k.record AND (l.status = {_DONE} OR l.attempts >= %(give_up)s::int))
 ORDER BY k.record
ON CONFLICT (job, period, record) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until
 WHERE c.lease_until <= %(now)s::timestamptz OR c.owner = excluded.owner
RETURNING c.record
"""

_POSTGRES_SETTLED = f"""
SELECT record FROM ledger
 WHERE job = %(job)s AND period = %(period)s AND record = ANY(%(keys)s::varchar[]) AND (status = {_DONE} OR attempts >= %(give_up)s::int)
"""

_POSTGRES_DROP = """
DELETE FROM ledger_claims WHERE job = %(job)s AND period = %(period)s AND record = ANY(%(keys)s::varchar[]) AND owner = %(owner)s
"""

# Renew and release name the claims by key (the primary key), not by owner: an index on the owner
# would cost every claim and every release a second b-tree write per record.
_RENEW = {
    Backend.SQLITE: "UPDATE ledger_claims SET lease_until = ?1 WHERE job = ?2 AND period = ?3"
    " AND record IN (SELECT value FROM json_each(?4)) AND owner = ?5",
    Backend.POSTGRESQL: "UPDATE ledger_claims SET lease_until = %(until)s::timestamptz WHERE job = %(job)s::varchar"
    " AND period = %(period)s::varchar AND record = ANY(%(keys)s::varchar[]) AND owner = %(owner)s::varchar",
}
_RELEASE = {
    Backend.SQLITE: "DELETE FROM ledger_claims WHERE job = ?2 AND period = ?3"
    " AND record IN (SELECT value FROM json_each(?4)) AND owner = ?5",
    Backend.POSTGRESQL: "DELETE FROM ledger_claims WHERE job = %(job)s::varchar AND period = %(period)s::varchar"
    " AND record = ANY(%(keys)s::varchar[]) AND owner = %(owner)s::varchar",
}


class RecordClaims:
    """The record claims of one store (``store.ledger.claims``)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._backend = store.backend
        self._time = times_of(store.backend).time

    def take(
        self,
        job: str,
        period: str,
        keys: Sequence[str],
        *,
        owner: str,
        until: datetime,
        now: datetime,
        give_up_after: int | None = None,
    ) -> set[str]:
        """Claim for ``owner`` until ``until`` what of ``keys`` (ledger keys) is free; returns the claimed keys.

        Free: not settled in the ledger (done, or failed ``give_up_after`` times) and not held by another
        owner's claim that is still live at ``now``. One transaction, one statement (two on PostgreSQL).
        """
        if not keys:
            return set()
        give_up = _NEVER if give_up_after is None else give_up_after
        with self._store.transaction() as connection:
            if self._backend is Backend.SQLITE:
                parameters = (
                    job, period, owner, self._time(until), json.dumps(list(keys)), give_up, self._time(now)
                )
                return {row[0] for row in connection.exec_driver_sql(_SQLITE_TAKE, parameters).fetchall()}
            values: dict[str, Any] = {
                "job": job, "period": period, "owner": owner, "until": until, "now": now,
                "keys": sorted(keys), "give_up": give_up,
            }
            taken = {row[0] for row in connection.exec_driver_sql(_POSTGRES_TAKE, values).fetchall()}
            if taken:
                values["keys"] = sorted(taken)
                late = {row[0] for row in connection.exec_driver_sql(_POSTGRES_SETTLED, values).fetchall()}
                if late:  # settled by another run after this statement's snapshot: not ours to run
                    values["keys"] = sorted(late)
                    connection.exec_driver_sql(_POSTGRES_DROP, values)
                    taken -= late
            return taken

    def renew(self, owner: str, job: str, period: str, keys: Sequence[str], until: datetime) -> int:
        """Move the leases of ``owner``'s claims on ``keys`` to ``until`` (a heartbeat); returns how many it holds."""
        with self._store.transaction() as connection:
            return self._run(connection, _RENEW, owner, job, period, keys, until)

    def release(
        self, owner: str, job: str, period: str, keys: Sequence[str], connection: sa.Connection | None = None
    ) -> int:
        """Drop ``owner``'s claims on ``keys`` (in ``connection``'s transaction when given); returns how many."""
        if connection is not None:
            return self._run(connection, _RELEASE, owner, job, period, keys)
        with self._store.transaction() as connection:
            return self._run(connection, _RELEASE, owner, job, period, keys)

    def _run(
        self,
        connection: sa.Connection,
        statements: dict[Backend, str],
        owner: str,
        job: str,
        period: str,
        keys: Sequence[str],
        until: datetime | None = None,
    ) -> int:
        if self._backend is Backend.SQLITE:
            # ?1 is the lease (unused by a release: bound all the same, numbered parameters are positional)
            parameters: Any = (self._time(until) if until else None, job, period, json.dumps(list(keys)), owner)
        else:  # in key order: rows are locked as the claims lock them (module doc)
            parameters = {"owner": owner, "job": job, "period": period, "keys": sorted(keys), "until": until}
        return int(connection.exec_driver_sql(statements[self._backend], parameters).rowcount)

    def held(self, job: str, period: str, now: datetime, *, by: str | None = None) -> dict[str, str]:
        """The records of (job, period) that live claims hold at ``now`` (of owner ``by``, when given): key -> owner."""
        c = ledger_claims.c
        query = sa.select(c.record, c.owner).where(c.job == job, c.period == period, c.lease_until > now)
        if by is not None:
            query = query.where(c.owner == by)
        with self._store.reading() as connection:
            return dict(connection.execute(query).all())

    def held_of(self, job: str, periods: Sequence[str], now: datetime) -> dict[str, dict[str, str]]:
        """``held`` of several periods of a job in one read (a period with no live claim maps to {})."""
        c = ledger_claims.c
        found: dict[str, dict[str, str]] = {period: {} for period in periods}
        query = sa.select(c.period, c.record, c.owner).where(
            c.job == job, c.period.in_(list(periods)), c.lease_until > now
        )
        with self._store.reading() as connection:
            for period, record, owner in connection.execute(query):
                found[period][record] = owner
        return found

    @staticmethod
    def free_clause(job: str, period: str, record_column: sa.ColumnElement[Any], now: datetime) -> sa.ColumnElement[bool]:
        """A SQL condition "no live claim holds this record at ``now``", for a source query in the store's database."""
        c = ledger_claims.c
        return ~sa.exists().where(
            c.job == job, c.period == period, c.record == sa.cast(record_column, sa.String), c.lease_until > now
        )
