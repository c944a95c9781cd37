"""The ledger: the durable record of what is done, one row per (job, record, period).

``done`` is sticky: a later ``failed`` mark for a record that is already done does not undo it (two runs
that raced on one record cannot turn a success into a failure). A deliberate rerun calls ``reset`` first.
Attempts add up over marks, so the row tells how many tries a record took.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from .records import LedgerEntry, LedgerRow, LedgerStatus, record_key
from .schema import ledger

if TYPE_CHECKING:
    from .api import Store

__all__ = ["Ledger"]

#: Records per transaction for bulk marks and per IN-list for lookups.
CHUNK_SIZE = 1_000
_DONE = LedgerStatus.DONE.value


def _row(row: sa.Row[Any]) -> LedgerRow:
    return LedgerRow(
        job=row.job,
        period=row.period,
        record=row.record,
        slot=row.slot,
        status=LedgerStatus(row.status),
        attempts=row.attempts,
        first_attempt_at=row.first_attempt_at,
        last_attempt_at=row.last_attempt_at,
        duration_ms=row.duration_ms,
        rows=row.rows,
        bytes=row.bytes,
        error=row.error,
    )


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class Ledger:
    """The ledger operations of one store."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._mark_statement = self._build_mark()

    def _build_mark(self) -> Any:
        insert = self._store.dialect_insert(ledger)
        excluded = insert.excluded
        c = ledger.c
        return insert.on_conflict_do_update(
            index_elements=["job", "period", "record"],
            set_={
                "status": sa.case((c.status == _DONE, c.status), else_=excluded.status),
                "attempts": c.attempts + excluded.attempts,
                "first_attempt_at": sa.func.coalesce(c.first_attempt_at, excluded.first_attempt_at),
                "last_attempt_at": excluded.last_attempt_at,
                "duration_ms": sa.case((c.status == _DONE, c.duration_ms), else_=excluded.duration_ms),
                "rows": sa.case((c.status == _DONE, c.rows), else_=excluded.rows),
                "bytes": sa.case((c.status == _DONE, c.bytes), else_=excluded.bytes),
                "error": sa.case((c.status == _DONE, c.error), else_=excluded.error),
                "slot": sa.func.coalesce(excluded.slot, c.slot),
            },
        )

    def mark(self, job: str, period: str, entries: Iterable[LedgerEntry], *, chunk_size: int = CHUNK_SIZE) -> int:
        """Record outcomes for many records, one transaction per chunk; returns how many were marked."""
        marked = 0
        for chunk in _chunks(entries, chunk_size):
            rows = [
                {
                    "job": job,
                    "period": period,
                    "record": record_key(entry.record),
                    "slot": entry.slot,
                    "status": entry.status,
                    "attempts": entry.attempts,
                    "first_attempt_at": entry.started_at,
                    "last_attempt_at": entry.finished_at or entry.started_at,
                    "duration_ms": entry.duration_ms,
                    "rows": entry.rows,
                    "bytes": entry.bytes,
                    "error": entry.error,
                }
                for entry in chunk
            ]
            # Upsert in key order: concurrent marks of overlapping records then take their row locks in
            # one order, so they wait for each other instead of deadlocking on PostgreSQL.
            rows.sort(key=lambda row: row["record"])
            with self._store.transaction() as connection:
                connection.execute(self._mark_statement, rows)
            marked += len(rows)
        return marked

    def reset(self, job: str, period: str, records: Iterable[int | str] | None = None) -> int:
        """Forget outcomes so the records run again (a deliberate rerun); all of the period without records."""
        c = ledger.c
        deleted = 0
        with self._store.transaction() as connection:
            if records is None:
                return connection.execute(sa.delete(ledger).where(c.job == job, c.period == period)).rowcount
            for chunk in _chunks((record_key(r) for r in records), CHUNK_SIZE):
                deleted += connection.execute(
                    sa.delete(ledger).where(c.job == job, c.period == period, c.record.in_(chunk))
                ).rowcount
        return deleted

    def get(self, job: str, record: int | str, period: str) -> LedgerRow | None:
        """The ledger row of one record in one period, or None."""
        c = ledger.c
        with self._store.reading() as connection:
            row = connection.execute(
                sa.select(ledger).where(c.job == job, c.period == period, c.record == record_key(record))
            ).first()
        return _row(row) if row is not None else None

    def completed(self, job: str, record: int | str, period: str) -> bool:
        """Whether the record is done for the period."""
        row = self.get(job, record, period)
        return row is not None and row.status is LedgerStatus.DONE

    @staticmethod
    def _settled(give_up_after: int | None) -> sa.ColumnElement[bool]:
        """Done, or (with ``give_up_after``) failed that many times: nothing more to run this period."""
        c = ledger.c
        if give_up_after is None:
            return c.status == _DONE
        return sa.or_(c.status == _DONE, c.attempts >= give_up_after)

    def done_among(
        self, job: str, period: str, records: Sequence[int | str], *, give_up_after: int | None = None
    ) -> set[str]:
        """Which of ``records`` are settled (as ledger keys); looked up in chunks, for sources in other databases.

        Settled means done, or with ``give_up_after`` also failed that many times.
        """
        c = ledger.c
        done: set[str] = set()
        with self._store.reading() as connection:
            for chunk in _chunks((record_key(r) for r in records), CHUNK_SIZE):
                done.update(
                    connection.execute(
                        sa.select(c.record).where(
                            c.job == job, c.period == period, self._settled(give_up_after), c.record.in_(chunk)
                        )
                    ).scalars()
                )
        return done

    def not_done(
        self, job: str, period: str, records: Iterable[int | str], *, give_up_after: int | None = None
    ) -> Iterator[int | str]:
        """The records, in their order, that are not settled for the period; reads the ledger in chunks."""
        for chunk in _chunks(records, CHUNK_SIZE):
            done = self.done_among(job, period, chunk, give_up_after=give_up_after)
            yield from (record for record in chunk if record_key(record) not in done)

    def not_done_clause(
        self,
        job: str,
        period: str,
        record_column: sa.ColumnElement[Any],
        *,
        give_up_after: int | None = None,
    ) -> sa.ColumnElement[bool]:
        """A SQL condition "this record is not settled", for a source query in the store's own database.

        It is an anti-join (``NOT EXISTS`` on the ledger's primary key), so the ledger is never loaded
        into Python and only not-done ids leave the database.
        """
        c = ledger.c
        return ~sa.exists().where(
            c.job == job,
            c.period == period,
            c.record == sa.cast(record_column, sa.String),
            self._settled(give_up_after),
        )

    def settled_in_slot(self, job: str, period: str, slot: int, *, give_up_after: int | None = None) -> set[str]:
        """The ledger keys of one slot's settled records in a period: one indexed query, slot-sized."""
        c = ledger.c
        with self._store.reading() as connection:
            return set(
                connection.execute(
                    sa.select(c.record).where(
                        c.job == job, c.period == period, c.slot == slot, self._settled(give_up_after)
                    )
                ).scalars()
            )

    def count_settled(self, job: str, period: str, slot: int, *, give_up_after: int | None = None) -> int:
        """How many of one slot's records are settled in a period (an index-only count)."""
        c = ledger.c
        with self._store.reading() as connection:
            return int(
                connection.execute(
                    sa.select(sa.func.count()).where(
                        c.job == job, c.period == period, c.slot == slot, self._settled(give_up_after)
                    )
                ).scalar_one()
            )

    def first_period(self, job: str) -> str | None:
        """The earliest period the ledger has for the job: where its history begins."""
        c = ledger.c
        with self._store.reading() as connection:
            return connection.execute(sa.select(sa.func.min(c.period)).where(c.job == job)).scalar_one()

    def count_done(self, job: str, period: str, *, slot: int | None = None) -> int:
        """How many records of the period (of one slot, when given) are done."""
        c = ledger.c
        query = sa.select(sa.func.count()).where(c.job == job, c.period == period, c.status == _DONE)
        if slot is not None:
            query = query.where(c.slot == slot)
        with self._store.reading() as connection:
            return int(connection.execute(query).scalar_one())

    def rows(self, job: str, period: str) -> list[LedgerRow]:
        """Every ledger row of a job's period, by record."""
        c = ledger.c
        with self._store.reading() as connection:
            result = connection.execute(
                sa.select(ledger).where(c.job == job, c.period == period).order_by(c.record)
            )
            return [_row(row) for row in result]

    def counts(self, job: str, period: str) -> dict[LedgerStatus, int]:
        """How many records of the period are done and failed."""
        c = ledger.c
        with self._store.reading() as connection:
            found = dict(
                connection.execute(
                    sa.select(c.status, sa.func.count())
                    .where(c.job == job, c.period == period)
                    .group_by(c.status)
                ).all()
            )
        return {status: found.get(status.value, 0) for status in LedgerStatus}

    def periods(self, job: str) -> list[str]:
        """The periods the ledger has rows for, in order."""
        c = ledger.c
        with self._store.reading() as connection:
            return list(
                connection.execute(sa.select(c.period).where(c.job == job).distinct().order_by(c.period)).scalars()
            )
