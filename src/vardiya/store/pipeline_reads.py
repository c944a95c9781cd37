"""Reading the pipeline tables: a pipeline's tasks, runs, attempt history and recorded reads, as records.

``PipelineReads`` is the read half of ``PipelineState`` (``pipeline_state.py``); the reports, the
sensors and ``vardiya pipeline status`` need only this half.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa

from ..clock import Clock
from ..states import RunState, TaskState, task_name
from .schema import pipeline_reads, pipeline_runs, pipeline_task_runs, pipeline_tasks

if TYPE_CHECKING:
    from .api import Store

__all__ = [
    "CHUNK_SIZE", "PipelineReads", "RunRecord", "TaskAttempt", "TaskCheckpoint", "TaskRead", "TaskRecord", "name_chunks",
]

#: Task names per IN-list, well under every backend's bound-parameter limit.
CHUNK_SIZE = 500


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskRecord:
    """A task's latest state and the checkpoint of its last success."""

    pipeline: str
    task: str
    state: TaskState
    attempts: int
    run_id: int | None
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    output_path: str | None
    output_fingerprint: str | None
    rows: int | None
    materialized_at: datetime | None
    materialized_run_id: int | None


class TaskCheckpoint(NamedTuple):
    """What planning a run needs of a task's row: its latest state and its last success's checkpoint.

    A named tuple, not a ``TaskRecord``: a plan reads every task of the pipeline (10,000 and more),
    and the record's three times are most of the cost of reading a row (``PipelineReads.checkpoints``).
    """

    state: TaskState
    #: Whether its current output has a file (False: it produced none, or never succeeded). The plan
    #: looks for the file where the stage writes it, so the path itself is not read.
    has_output: bool
    #: The run that materialized its current output (None: none did).
    materialized_run_id: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskAttempt:
    """One attempt at a task in one run, from the history."""

    id: int
    run_id: int
    pipeline: str
    task: str
    attempt: int
    state: TaskState
    started_at: datetime
    finished_at: datetime | None
    error: str | None
    #: Rows the attempt published (None: it failed, or was recorded before vardiya kept the figure).
    rows: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecord:
    """A pipeline run: when, how it ended, and the options it was started with."""

    id: int
    pipeline: str
    started_at: datetime
    finished_at: datetime | None
    state: RunState
    options: dict[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskRead:
    """A recorded read: in run ``run_id``, ``task`` read ``stage@partition``."""

    run_id: int
    task: str
    stage: str
    partition: str
    declared: bool

    @property
    def read_task(self) -> str:
        """The task whose output was read."""
        return task_name(self.stage, self.partition)


def name_chunks(names: Iterable[str]) -> Iterator[list[str]]:
    """``names`` in lists of at most ``CHUNK_SIZE``, one IN-list each."""
    chunk: list[str] = []
    for name in names:
        chunk.append(name)
        if len(chunk) >= CHUNK_SIZE:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _task(row: sa.Row[Any]) -> TaskRecord:
    return TaskRecord(
        pipeline=row.pipeline,
        task=row.task,
        state=TaskState(row.state),
        attempts=row.attempts,
        run_id=row.run_id,
        started_at=row.started_at,
        finished_at=row.finished_at,
        error=row.error,
        output_path=row.output_path,
        output_fingerprint=row.output_fingerprint,
        rows=row.rows,
        materialized_at=row.materialized_at,
        materialized_run_id=row.materialized_run_id,
    )


def _attempt(row: sa.Row[Any]) -> TaskAttempt:
    return TaskAttempt(
        id=row.id,
        run_id=row.run_id,
        pipeline=row.pipeline,
        task=row.task,
        attempt=row.attempt,
        state=TaskState(row.state),
        started_at=row.started_at,
        finished_at=row.finished_at,
        error=row.error,
        rows=row.rows,
    )


def _run(row: sa.Row[Any]) -> RunRecord:
    return RunRecord(
        id=row.id,
        pipeline=row.pipeline,
        started_at=row.started_at,
        finished_at=row.finished_at,
        state=RunState(row.state),
        options=dict(row.options),
    )


class PipelineReads:
    """The pipeline tables of one store, read for one pipeline, timed by ``clock`` (the store's by default)."""

    def __init__(self, store: Store, pipeline: str, *, clock: Clock | None = None) -> None:
        self._store = store
        self.pipeline = pipeline
        self.clock = clock or store.clock

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.pipeline!r}, {self._store!r})"

    # -- reading ------------------------------------------------------------------------------------

    def tasks(self) -> dict[str, TaskRecord]:
        """Every task of the pipeline that has a row, by name."""
        t = pipeline_tasks.c
        with self._store.reading() as connection:
            rows = connection.execute(sa.select(pipeline_tasks).where(t.pipeline == self.pipeline))
            return {row.task: _task(row) for row in rows}

    def task_states(self) -> dict[str, tuple[TaskState, int | None]]:
        """Every task of the pipeline that has a row, by name: its state and the run that materialized
        its current output (None: none). What the status reads, without the rest of each row."""
        t = pipeline_tasks.c
        # The state as its plain text, mapped here: the Enum type's per-row processing costs more.
        states = {state.value: state for state in TaskState}
        query = sa.select(t.task, sa.type_coerce(t.state, sa.String), t.materialized_run_id).where(
            t.pipeline == self.pipeline
        )
        with self._store.reading() as connection:
            rows = connection.execute(query).all()  # one fetch: psycopg's row-by-row fetch costs more than the row
        return {task: (states[state], run_id) for task, state, run_id in rows}

    def checkpoints(self) -> dict[str, TaskCheckpoint]:
        """Every task of the pipeline that has a row, by name: its state, whether its output has a file
        and the run that materialized it. What a run's plan (and the resume preview) reads, in one query."""
        t = pipeline_tasks.c
        states = {state.value: state for state in TaskState}
        has_output = sa.case((t.output_path.is_(None), 0), else_=1)  # 0 or 1 on both backends
        query = sa.select(t.task, sa.type_coerce(t.state, sa.String), has_output, t.materialized_run_id).where(
            t.pipeline == self.pipeline
        )
        with self._store.reading() as connection:
            rows = connection.execute(query).all()  # one fetch, as in task_states
        return {task: TaskCheckpoint(states[state], flag == 1, run_id) for task, state, flag, run_id in rows}

    def task(self, name: str) -> TaskRecord | None:
        """One task's row, or None when it was never planned."""
        t = pipeline_tasks.c
        with self._store.reading() as connection:
            row = connection.execute(
                sa.select(pipeline_tasks).where(t.pipeline == self.pipeline, t.task == name)
            ).first()
        return _task(row) if row is not None else None

    def runs(self) -> list[RunRecord]:
        """Every run of the pipeline, oldest first."""
        r = pipeline_runs.c
        with self._store.reading() as connection:
            rows = connection.execute(sa.select(pipeline_runs).where(r.pipeline == self.pipeline).order_by(r.id))
            return [_run(row) for row in rows]

    def last_run(self) -> RunRecord | None:
        """The newest run, or None before the first."""
        r = pipeline_runs.c
        with self._store.reading() as connection:
            row = connection.execute(
                sa.select(pipeline_runs).where(r.pipeline == self.pipeline).order_by(r.id.desc()).limit(1)
            ).first()
        return _run(row) if row is not None else None

    def history(self, *, run_id: int | None = None, task: str | None = None) -> list[TaskAttempt]:
        """Attempts, in the order they started (by id), of one run and/or one task, or all of them."""
        h = pipeline_task_runs.c
        query = sa.select(pipeline_task_runs).where(h.pipeline == self.pipeline).order_by(h.id)
        if run_id is not None:
            query = query.where(h.run_id == run_id)
        if task is not None:
            query = query.where(h.task == task)
        with self._store.reading() as connection:
            return [_attempt(row) for row in connection.execute(query)]

    def reads(self, *, run_id: int | None = None, task: str | None = None) -> list[TaskRead]:
        """Recorded reads of one run and/or one task, or of every run of the pipeline."""
        d, r = pipeline_reads.c, pipeline_runs.c
        query = (
            sa.select(pipeline_reads)
            .join(pipeline_runs, r.id == d.run_id)
            .where(r.pipeline == self.pipeline)
            .order_by(d.run_id, d.task, d.read_stage, d.read_partition)
        )
        if run_id is not None:
            query = query.where(d.run_id == run_id)
        if task is not None:
            query = query.where(d.task == task)
        with self._store.reading() as connection:
            return [
                TaskRead(
                    run_id=row.run_id, task=row.task, stage=row.read_stage, partition=row.read_partition,
                    declared=row.declared,
                )
                for row in connection.execute(query)
            ]

    def materialized_reads(self) -> dict[str, list[str]]:
        """For each task, what the run that materialized its current output recorded it reading."""
        d, t = pipeline_reads.c, pipeline_tasks.c
        query = (
            sa.select(d.task, d.read_stage, d.read_partition)
            .join(pipeline_tasks, sa.and_(t.materialized_run_id == d.run_id, t.task == d.task))
            .where(t.pipeline == self.pipeline)
        )
        found: dict[str, list[str]] = {}
        with self._store.reading() as connection:
            for row in connection.execute(query):
                found.setdefault(row.task, []).append(task_name(row.read_stage, row.read_partition))
        return found

    def succeeded_among(self, names: Iterable[str]) -> set[str]:
        """Which of the tasks ``names`` have succeeded (their latest state)."""
        t = pipeline_tasks.c
        found: set[str] = set()
        with self._store.reading() as connection:
            for chunk in name_chunks(names):
                found.update(
                    connection.execute(
                        sa.select(t.task).where(
                            t.pipeline == self.pipeline, t.state == TaskState.SUCCEEDED, t.task.in_(chunk)
                        )
                    ).scalars()
                )
        return found
