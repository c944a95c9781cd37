"""What failed and why, and what ran over its SLA: the store's side of ``vardiya errors`` and status.

Three families fail, each where its failures are already recorded (migration 0010 adds the tracebacks):

- ``job``: a slot job's record; the ledger keeps its status, ``ledger_failures`` its last failure
  (error line, traceback, when), written by the tick that failed it (``keep_ledger``);
- ``handler``: an attempt at a work item of a handler (an async call or a stream batch); its history
  row in ``work_item_attempts`` gets the traceback in the transaction that records it
  (``keep_attempt_traceback``);
- ``pipeline``: an attempt at a pipeline task (``pipeline_task_runs``), likewise
  (``keep_task_tracebacks``).

``listing`` reads the three newest first, each an index or primary-key walk from its newest row, so a
ledger of millions of done records is never scanned for its few failures.

SLA misses (``sla_missed``) are counted per (family, name) in one row each, with the last miss: a run
over its SLA is rare enough that one upsert per batch of misses costs nothing worth measuring.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..tracebacks import storable_line
from .records import AttemptOutcome, ItemState
from .schema import TaskState, attempts, ledger, ledger_failures, pipeline_task_runs, sla_misses, work_items

if TYPE_CHECKING:
    from .api import Store

__all__ = ["Failure", "FailureFamily", "Failures", "LedgerFailure", "SlaMiss", "SlaRow"]

#: The work item kinds of each family, by prefix: a handler's calls and batches; the ticks and the
#: pipeline runs the services queue (an item of theirs fails when its tick or run could not run).
_KINDS = {
    "handler": ("call:", "batch:"),
    "job": ("tick:",),
    "pipeline": ("pipeline:",),
}
_FAMILY_OF_PREFIX = {prefix: family for family, prefixes in _KINDS.items() for prefix in prefixes}


class FailureFamily(str, enum.Enum):
    """What failed: a slot job's record, a handler's work item attempt or a pipeline's task attempt."""

    JOB = "job"
    HANDLER = "handler"
    PIPELINE = "pipeline"


@dataclass(frozen=True, kw_only=True, slots=True)
class LedgerFailure:
    """One failed record of a tick, as ``keep_ledger`` stores it."""

    job: str
    period: str
    record: str
    failed_at: datetime
    error: str
    traceback: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Failure:
    """One failure as ``vardiya errors`` lists it.

    ``what`` names the failed thing in its family's words: ``period/record`` of a job, the work item id
    (and attempt) of a handler, the task (``stage@partition``) of a pipeline. ``state`` is where that
    thing stands now (a failed record may have been done since, a failed attempt retried).
    """

    family: FailureFamily
    name: str
    what: str
    attempt: int | None
    failed_at: datetime
    error: str
    traceback: str | None
    state: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "family": self.family.value,
            "name": self.name,
            "what": self.what,
            "attempt": self.attempt,
            "failed_at": self.failed_at.isoformat(),
            "error": self.error,
            "traceback": self.traceback,
            "state": self.state,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class SlaMiss:
    """One run over its SLA: a tick of a job (``ref`` its planned time), a handler call, a task."""

    family: FailureFamily
    name: str
    ref: str
    expected_ms: float
    took_ms: float
    at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class SlaRow:
    """How many runs of one job, handler or stage went over its SLA, and the last that did."""

    family: FailureFamily
    name: str
    missed: int
    expected_ms: float
    last_took_ms: float
    last_ref: str
    last_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "family": self.family.value,
            "name": self.name,
            "missed": self.missed,
            "expected_s": self.expected_ms / 1000,
            "last_took_s": self.last_took_ms / 1000,
            "last": self.last_ref,
            "last_at": self.last_at.isoformat(),
        }


class Failures:
    """The failure and SLA operations of one store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    # -- writing ------------------------------------------------------------------------------------

    def keep_ledger(self, failures: Sequence[LedgerFailure]) -> None:
        """Store the last failure of each of these records (replacing what an earlier failure left)."""
        if not failures:
            return
        insert = self._store.dialect_insert(ledger_failures)
        values = [
            {
                "job": failure.job, "period": failure.period, "record": failure.record,
                "failed_at": failure.failed_at, "error": storable_line(failure.error),
                "traceback": failure.traceback,
            }
            for failure in failures
        ]
        statement = insert.on_conflict_do_update(
            index_elements=["job", "period", "record"],
            set_={name: insert.excluded[name] for name in ("failed_at", "error", "traceback")},
        )
        with self._store.transaction() as connection:
            connection.execute(statement, values)

    @staticmethod
    def keep_attempt_traceback(connection: sa.Connection, item_ids: Sequence[int], traceback: str | None) -> None:
        """Attach ``traceback`` to the newest history row of each item, inside the caller's transaction:
        the one the caller just appended for the attempt that failed."""
        if traceback is None or not item_ids:
            return
        a = attempts.c
        newest = sa.select(sa.func.max(a.id)).where(a.item_id == sa.bindparam("item")).scalar_subquery()
        connection.execute(
            sa.update(attempts).where(a.id == newest).values(traceback=sa.bindparam("traceback_text")),
            [{"item": item_id, "traceback_text": traceback} for item_id in item_ids],
        )

    @staticmethod
    def keep_task_tracebacks(connection: sa.Connection, tracebacks: Sequence[tuple[int, str]]) -> None:
        """Attach each (attempt id, traceback) to its pipeline task run, inside the caller's transaction."""
        if not tracebacks:
            return
        t = pipeline_task_runs.c
        connection.execute(
            sa.update(pipeline_task_runs).where(t.id == sa.bindparam("attempt_id")).values(traceback=sa.bindparam("traceback_text")),
            [{"attempt_id": attempt_id, "traceback_text": text} for attempt_id, text in tracebacks],
        )

    def sla_missed(self, misses: Iterable[SlaMiss]) -> None:
        """Count these misses, per (family, name), and keep the last of each."""
        last: dict[tuple[FailureFamily, str], tuple[int, SlaMiss]] = {}
        for miss in misses:
            count, _ = last.get((miss.family, miss.name), (0, miss))
            last[(miss.family, miss.name)] = (count + 1, miss)
        if not last:
            return
        insert = self._store.dialect_insert(sla_misses)
        statement = insert.on_conflict_do_update(
            index_elements=["family", "name"],
            set_={
                "missed": sla_misses.c.missed + insert.excluded.missed,
                "expected_ms": insert.excluded.expected_ms,
                "last_took_ms": insert.excluded.last_took_ms,
                "last_ref": insert.excluded.last_ref,
                "last_at": insert.excluded.last_at,
            },
        )
        values = [
            {
                "family": miss.family.value, "name": miss.name, "missed": count, "expected_ms": miss.expected_ms,
                "last_took_ms": miss.took_ms, "last_ref": miss.ref[:500], "last_at": miss.at,
            }
            for (_family, _name), (count, miss) in sorted(last.items(), key=lambda entry: (entry[0][0].value, entry[0][1]))
        ]
        with self._store.transaction() as connection:
            connection.execute(statement, values)

    # -- reading ------------------------------------------------------------------------------------

    def listing(
        self,
        *,
        family: FailureFamily | None = None,
        name: str | None = None,
        since: datetime | None = None,
        limit: int = 20,
    ) -> list[Failure]:
        """The newest ``limit`` failures (of one family, of one name in it, since a time), newest first."""
        found: list[Failure] = []
        with self._store.reading() as connection:
            if family in (None, FailureFamily.JOB):
                found += self._ledger(connection, name, since, limit)
            found += self._attempts(connection, family, name, since, limit)
            if family in (None, FailureFamily.PIPELINE):
                found += self._tasks(connection, name, since, limit)
        found.sort(key=lambda failure: failure.failed_at, reverse=True)
        return found[:limit]

    @staticmethod
    def _ledger(connection: sa.Connection, name: str | None, since: datetime | None, limit: int) -> list[Failure]:
        f, lg = ledger_failures.c, ledger.c
        query = (
            sa.select(f.job, f.period, f.record, f.failed_at, f.error, f.traceback, lg.status)
            .select_from(
                ledger_failures.outerjoin(ledger, sa.and_(lg.job == f.job, lg.period == f.period, lg.record == f.record))
            )
            .order_by(f.failed_at.desc(), f.job, f.period, f.record)
            .limit(limit)
        )
        if name is not None:
            query = query.where(f.job == name)
        if since is not None:
            query = query.where(f.failed_at >= since)
        return [
            Failure(
                family=FailureFamily.JOB, name=row.job, what=f"{row.period}/{row.record}", attempt=None,
                failed_at=row.failed_at, error=row.error, traceback=row.traceback,
                state=None if row.status is None else getattr(row.status, "value", row.status),
            )
            for row in connection.execute(query)
        ]

    @staticmethod
    def _attempts(
        connection: sa.Connection, family: FailureFamily | None, name: str | None, since: datetime | None, limit: int
    ) -> list[Failure]:
        """Failed attempts at work items (a handler's; a service's tick or pipeline run), newest first."""
        a, c = attempts.c, work_items.c
        prefixes = [prefix for key, kinds in _KINDS.items() if family in (None, key) for prefix in kinds]
        query = (
            sa.select(a.item_id, a.attempt, a.ended_at, a.outcome, a.error, a.traceback, c.kind, c.state)
            .select_from(attempts.join(work_items, c.id == a.item_id))
            .order_by(a.id.desc())
            .limit(limit)
        )
        if name is not None:
            query = query.where(c.kind.in_([prefix + name for prefix in prefixes]))
        elif family is not None:
            query = query.where(sa.or_(*(c.kind.startswith(prefix, autoescape=True) for prefix in prefixes)))
        if since is not None:
            query = query.where(a.ended_at >= since)
        found = []
        for row in connection.execute(query):
            prefix, _, item_name = row.kind.partition(":")
            kind_family = _FAMILY_OF_PREFIX.get(prefix + ":")
            if kind_family is None:  # an item of the primitives API, not of an app's job, handler or pipeline
                continue
            found.append(Failure(
                family=FailureFamily(kind_family), name=item_name,
                what=f"item {row.item_id}" if kind_family == "handler" else f"{prefix} item {row.item_id}",
                attempt=row.attempt, failed_at=row.ended_at,
                error=row.error or AttemptOutcome(row.outcome).value, traceback=row.traceback,
                state=ItemState(row.state).value,
            ))
        return found

    @staticmethod
    def _tasks(connection: sa.Connection, name: str | None, since: datetime | None, limit: int) -> list[Failure]:
        t = pipeline_task_runs.c
        query = (
            sa.select(t.pipeline, t.task, t.attempt, t.run_id, t.finished_at, t.started_at, t.error, t.traceback)
            .where(t.state == TaskState.FAILED)
            .order_by(t.id.desc())
            .limit(limit)
        )
        if name is not None:
            query = query.where(t.pipeline == name)
        if since is not None:
            query = query.where(t.finished_at >= since)
        return [
            Failure(
                family=FailureFamily.PIPELINE, name=row.pipeline, what=f"{row.task} (run {row.run_id})",
                attempt=row.attempt, failed_at=row.finished_at or row.started_at, error=row.error or "failed",
                traceback=row.traceback, state=None,
            )
            for row in connection.execute(query)
        ]

    def attempt_tracebacks(self, item_id: int) -> list[str | None]:
        """The traceback of each history row of a work item, in the order of ``items.history``."""
        a = attempts.c
        with self._store.reading() as connection:
            return [row.traceback for row in connection.execute(
                sa.select(a.traceback).where(a.item_id == item_id).order_by(a.id)
            )]

    def sla_report(self) -> list[SlaRow]:
        """Every job, handler and stage that went over its SLA at least once, by family and name."""
        s = sla_misses.c
        with self._store.reading() as connection:
            rows = connection.execute(sa.select(sla_misses).order_by(s.family, s.name)).all()
        return [
            SlaRow(
                family=FailureFamily(row.family), name=row.name, missed=row.missed, expected_ms=row.expected_ms,
                last_took_ms=row.last_took_ms, last_ref=row.last_ref, last_at=row.last_at,
            )
            for row in rows
        ]
