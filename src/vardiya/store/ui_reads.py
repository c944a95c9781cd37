"""Reads the dashboard needs that no command made yet: one task's failed attempts with tracebacks, and
one tick's records (its slot of one period) with their outcomes and last failures.

``pipeline_task_runs`` is read by (pipeline, task), newest first, bounded by ``limit``, so a pipeline
with a long history answers a task page without reading the other tasks' rows. A tick's records are
read by (job, period, slot) through ``ix_ledger_job_period_slot`` (failed ones first, then by record,
at most ``limit``), each joined by its primary key to its row in ``ledger_failures`` (the traceback
``vardiya errors`` shows); its counts per status are read from the same index alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from .records import LedgerStatus
from .schema import TaskState, ledger, ledger_failures, pipeline_task_runs

if TYPE_CHECKING:
    from .api import Store

__all__ = ["TaskFailure", "TickRecord", "task_failures", "tick_counts", "tick_records"]


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskFailure:
    """A failed attempt at a task: which run and attempt, its error line and traceback."""

    run_id: int
    attempt: int
    error: str | None
    traceback: str | None

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "attempt": self.attempt, "error": self.error, "traceback": self.traceback}


def task_failures(store: Store, pipeline: str, task: str, *, limit: int = 20) -> list[TaskFailure]:
    """The task's failed attempts, newest first (at most ``limit``)."""
    t = pipeline_task_runs.c
    query = (
        sa.select(t.run_id, t.attempt, t.error, t.traceback)
        .where(t.pipeline == pipeline, t.task == task, t.state == TaskState.FAILED)
        .order_by(t.id.desc())
        .limit(limit)
    )
    with store.reading() as connection:
        return [TaskFailure(run_id=row.run_id, attempt=row.attempt, error=row.error, traceback=row.traceback)
                for row in connection.execute(query)]


@dataclass(frozen=True, kw_only=True, slots=True)
class TickRecord:
    """One record of a tick's slot: its ledger outcome and, if it ever failed, its last failure."""

    record: str
    status: LedgerStatus
    attempts: int
    last_attempt_at: datetime | None
    duration_ms: float
    rows: int
    error: str | None
    failed_at: datetime | None
    traceback: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "record": self.record, "status": self.status.value, "attempts": self.attempts,
            "last_attempt_at": None if self.last_attempt_at is None else self.last_attempt_at.isoformat(),
            "duration_ms": self.duration_ms, "rows": self.rows, "error": self.error,
            "failed_at": None if self.failed_at is None else self.failed_at.isoformat(), "traceback": self.traceback,
        }


def tick_counts(store: Store, job: str, period: str, slot: int) -> dict[LedgerStatus, int]:
    """How many of the slot's records the ledger holds in each status (index-only)."""
    lg = ledger.c
    query = (
        sa.select(lg.status, sa.func.count())
        .where(lg.job == job, lg.period == period, lg.slot == slot)
        .group_by(lg.status)
    )
    with store.reading() as connection:
        return {LedgerStatus(row[0]): int(row[1]) for row in connection.execute(query)}


def tick_records(store: Store, job: str, period: str, slot: int, *, limit: int = 200) -> list[TickRecord]:
    """The slot's records in the ledger, failed ones first, then by record id (at most ``limit``)."""
    lg, f = ledger.c, ledger_failures.c
    failed_first = sa.case((lg.status == LedgerStatus.FAILED, 0), else_=1)
    query = (
        sa.select(lg.record, lg.status, lg.attempts, lg.last_attempt_at, lg.duration_ms, lg.rows, lg.error,
                  f.failed_at, f.traceback)
        .select_from(ledger.outerjoin(
            ledger_failures, sa.and_(f.job == lg.job, f.period == lg.period, f.record == lg.record)))
        .where(lg.job == job, lg.period == period, lg.slot == slot)
        .order_by(failed_first, lg.record)
        .limit(limit)
    )
    with store.reading() as connection:
        return [
            TickRecord(
                record=row.record, status=LedgerStatus(row.status), attempts=row.attempts,
                last_attempt_at=row.last_attempt_at, duration_ms=row.duration_ms, rows=row.rows, error=row.error,
                failed_at=row.failed_at, traceback=row.traceback,
            )
            for row in connection.execute(query)
        ]
