"""Store access for pipelines: runs, task checkpoints, the attempt history, the lineage of reads.

The contract (tested on SQLite and PostgreSQL by ``tests/contract/test_pipeline_state.py``):

- ``open_run`` records a run with the options it was started with. It first closes what a killed
  process left open: runs still ``running`` become ``interrupted``, tasks still ``running`` become
  ``failed`` (so the restart runs them), and their open attempts are closed the same way. One runner
  per pipeline at a time is assumed: a second process running the same pipeline would see the first
  one's work as interrupted.
- ``start_attempt`` marks a task ``running`` and opens an attempt in the history; ``succeed`` and
  ``fail`` close it, in one transaction with the task's new state and the reads the attempt made.
  ``succeed`` is the checkpoint: path (None for no output), fingerprint and row count of the output,
  and when and in which run it was materialized.
- ``record`` does any number of those, and ``block``, in one transaction: the runner writes each wave
  of transitions that way (the tasks that just ended, the tasks they block, the tasks that start
  next), so a task's checkpoint is durable no later than the start of any task that depends on it.
  Inside ``holding_connection`` a thread's writes keep one connection; each is still its own
  transaction.
- A task that was never planned has no row; its state is ``pending``.
- ``status`` lists every task's state and the stale ones: a succeeded task is stale when a task it
  depends on (declared, or recorded as read) was materialized by a later run than itself.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..clock import Clock
from ..store.engine import driver_errors
from ..store.hot import hot_sql
from ..store.schema import RunState, TaskState, pipeline_reads, pipeline_runs, pipeline_task_runs, pipeline_tasks
from ..store.url import Backend
from .graph import TaskGraph, build_graph, task_name
from .io import Output, Read
from .stages import Pipeline

if TYPE_CHECKING:
    from ..store.api import Store

__all__ = [
    "AttemptEnd",
    "PipelineState",
    "PipelineStatus",
    "RunRecord",
    "TaskAttempt",
    "TaskRead",
    "TaskRecord",
    "status",
]

#: Task names per IN-list, well under every backend's bound-parameter limit.
CHUNK_SIZE = 500
INTERRUPTED = "interrupted: the run that started it ended without finishing it (its process was killed?)"


# The statements of a task's transitions, run on the transaction's DBAPI cursor: they run for every
# task, and SQLAlchemy cost far more than the database work (on SQLite, building them with Core took
# about 1 ms per task start and again per checkpoint; even exec_driver_sql adds some 45 us a statement,
# against about 12 us in sqlite3 itself). Values are bound parameters only, converted as the column
# types would convert them (times by the store's hot-path converter).
_START = """
INSERT INTO pipeline_tasks (pipeline, task, state, attempts, run_id, started_at, finished_at, error)
VALUES (?, ?, ?, 1, ?, ?, NULL, NULL)
ON CONFLICT (pipeline, task) DO UPDATE SET
    state = excluded.state, attempts = pipeline_tasks.attempts + 1, run_id = excluded.run_id,
    started_at = excluded.started_at, finished_at = NULL, error = NULL
"""
_OPEN_ATTEMPT = """
INSERT INTO pipeline_task_runs (run_id, pipeline, task, attempt, state, started_at) VALUES (?, ?, ?, ?, ?, ?)
RETURNING id
"""
_CLOSE_ATTEMPT = "UPDATE pipeline_task_runs SET state = ?, finished_at = ?, error = ?, rows = ? WHERE id = ?"
_CHECKPOINT = """
UPDATE pipeline_tasks SET state = ?, finished_at = ?, error = NULL, output_path = ?, output_fingerprint = ?,
    rows = ?, materialized_at = ?, materialized_run_id = ?
 WHERE pipeline = ? AND task = ?
"""
_FAIL = "UPDATE pipeline_tasks SET state = ?, finished_at = ?, error = ? WHERE pipeline = ? AND task = ?"
_READS = """
INSERT INTO pipeline_reads (run_id, task, read_stage, read_partition, declared) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (run_id, task, read_stage, read_partition) DO NOTHING
"""


@dataclass(frozen=True, slots=True)
class _Statements:
    start: str
    open_attempt: str
    close_attempt: str
    checkpoint: str
    fail: str
    reads: str

    @classmethod
    def of(cls, backend: Backend) -> _Statements:
        def spell(text: str) -> str:
            return text if backend is Backend.SQLITE else text.replace("?", "%s")

        return cls(*(spell(text) for text in (_START, _OPEN_ATTEMPT, _CLOSE_ATTEMPT, _CHECKPOINT, _FAIL, _READS)))


_STATEMENTS = {backend: _Statements.of(backend) for backend in Backend}


@contextlib.contextmanager
def _driver_cursor(connection: sa.Connection) -> Iterator[Any]:
    """A DBAPI cursor inside ``connection``'s transaction; its errors leave as SQLAlchemy's would, so the
    store's boundary still turns them into ``StoreError``."""
    base = connection.dialect.loaded_dbapi.Error
    cursor = connection.connection.cursor()
    try:
        yield cursor
    except base as error:
        raise sa.exc.DBAPIError.instance(None, None, error, base, hide_parameters=True) from error
    finally:
        cursor.close()


@dataclass(frozen=True, kw_only=True, slots=True)
class AttemptEnd:
    """How one attempt ended, for ``PipelineState.record``: with an ``output`` it succeeded (the checkpoint)."""

    attempt_id: int
    task: str
    finished_at: datetime
    output: Output | None = None
    error: str | None = None
    reads: tuple[Read, ...] = ()
    #: a failed attempt's traceback, bounded (``vardiya.tracebacks``)
    traceback: str | None = None


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


def _chunks(names: Iterable[str]) -> Iterator[list[str]]:
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


class PipelineState:
    """The pipeline tables of one store, for one pipeline, timed by ``clock`` (the store's by default)."""

    def __init__(self, store: Store, pipeline: str, *, clock: Clock | None = None) -> None:
        self._store = store
        self.pipeline = pipeline
        self.clock = clock or store.clock
        self._held = threading.local()  # a connection ``holding_connection`` keeps for its thread

    def __repr__(self) -> str:
        return f"PipelineState({self.pipeline!r}, {self._store!r})"

    @contextlib.contextmanager
    def holding_connection(self) -> Iterator[None]:
        """Keep one connection for this thread's ``record`` calls while the block runs.

        A run's coordinator records one wave per task, and taking a connection from the pool for each
        cost about a sixth of a no-op task. Other threads are unaffected; each wave is still its own
        transaction.
        """
        with driver_errors(self._store.target):
            connection = self._store.engine.connect()
        self._held.connection = connection
        try:
            yield
        finally:
            del self._held.connection
            with driver_errors(self._store.target):
                connection.close()

    @contextlib.contextmanager
    def _writing(self) -> Iterator[sa.Connection]:
        connection: sa.Connection | None = getattr(self._held, "connection", None)
        if connection is None:
            with self._store.transaction() as fresh:
                yield fresh
            return
        with driver_errors(self._store.target), connection.begin():
            yield connection

    # -- reading ------------------------------------------------------------------------------------

    def tasks(self) -> dict[str, TaskRecord]:
        """Every task of the pipeline that has a row, by name."""
        t = pipeline_tasks.c
        with self._store.reading() as connection:
            rows = connection.execute(sa.select(pipeline_tasks).where(t.pipeline == self.pipeline))
            return {row.task: _task(row) for row in rows}

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

    # -- writing ------------------------------------------------------------------------------------

    def open_run(self, options: Mapping[str, Any], *, invalidate: Sequence[str] = ()) -> int:
        """Record a new run and return its id, after closing what an earlier, killed run left open.

        ``invalidate`` (a rerun set) is made ``pending`` in the same transaction, so a rerun that is
        killed right after starting still leaves those tasks to run.
        """
        now = self.clock.now()
        r, t, h = pipeline_runs.c, pipeline_tasks.c, pipeline_task_runs.c
        with self._store.transaction() as connection:
            connection.execute(
                sa.update(pipeline_runs)
                .where(r.pipeline == self.pipeline, r.state == RunState.RUNNING)
                .values(state=RunState.INTERRUPTED, finished_at=now)
            )
            connection.execute(
                sa.update(pipeline_tasks)
                .where(t.pipeline == self.pipeline, t.state == TaskState.RUNNING)
                .values(state=TaskState.FAILED, finished_at=now, error=INTERRUPTED)
            )
            connection.execute(
                sa.update(pipeline_task_runs)
                .where(h.pipeline == self.pipeline, h.state == TaskState.RUNNING)
                .values(state=TaskState.FAILED, finished_at=now, error=INTERRUPTED)
            )
            run_id: int = connection.execute(
                sa.insert(pipeline_runs)
                .values(pipeline=self.pipeline, started_at=now, state=RunState.RUNNING, options=dict(options))
                .returning(r.id)
            ).scalar_one()
            for chunk in _chunks(invalidate):
                connection.execute(
                    sa.update(pipeline_tasks)
                    .where(t.pipeline == self.pipeline, t.task.in_(chunk))
                    .values(state=TaskState.PENDING, error=None)
                )
        return run_id

    def close_run(self, run_id: int, state: RunState) -> None:
        """Record how a run ended."""
        r = pipeline_runs.c
        with self._store.transaction() as connection:
            connection.execute(
                sa.update(pipeline_runs).where(r.id == run_id).values(state=state, finished_at=self.clock.now())
            )

    def start_attempt(self, run_id: int, task: str, attempt: int) -> int:
        """Mark ``task`` running in ``run_id`` and open attempt number ``attempt``; returns the attempt's id."""
        (attempt_id,) = self.record(run_id, started=[(task, attempt)])
        return attempt_id

    def succeed(self, run_id: int, attempt_id: int, task: str, output: Output, reads: Sequence[Read] = ()) -> None:
        """The checkpoint: close the attempt and record the task's output, durably, with its reads."""
        end = AttemptEnd(
            attempt_id=attempt_id, task=task, finished_at=self.clock.now(), output=output, reads=tuple(reads)
        )
        self.record(run_id, ended=[end])

    def fail(
        self, run_id: int, attempt_id: int, task: str, error: str, reads: Sequence[Read] = (),
        traceback: str | None = None,
    ) -> None:
        """Close the attempt as failed; the task's last good output (if any) stays checkpointed."""
        end = AttemptEnd(
            attempt_id=attempt_id, task=task, finished_at=self.clock.now(), error=error, reads=tuple(reads),
            traceback=traceback,
        )
        self.record(run_id, ended=[end])

    def block(self, run_id: int, blocked: Mapping[str, str]) -> None:
        """Mark tasks ``blocked`` in ``run_id``, each with the reason (which upstream failed)."""
        self.record(run_id, blocked=blocked)

    def record(
        self,
        run_id: int,
        *,
        ended: Sequence[AttemptEnd] = (),
        blocked: Mapping[str, str] | None = None,
        started: Sequence[tuple[str, int]] = (),
    ) -> list[int]:
        """One wave of transitions in one transaction; returns the ids of the attempts ``started`` opens.

        In order: close the ``ended`` attempts (a success is its task's checkpoint; every attempt's reads
        are recorded), mark ``blocked`` tasks with their reasons, then mark each ``(task, attempt
        number)`` of ``started`` running, started now, with its attempt opened. Nothing to record writes
        nothing.
        """
        if not (ended or blocked or started):
            return []
        statements = _STATEMENTS[self._store.backend]
        to_driver = hot_sql(self._store.backend).time
        pipeline = self.pipeline
        closed: list[tuple[Any, ...]] = []
        checkpoints: list[tuple[Any, ...]] = []
        failures: list[tuple[Any, ...]] = []
        reads: list[tuple[Any, ...]] = []
        for end in ended:
            finished = to_driver(end.finished_at)
            output = end.output
            if output is None:
                closed.append((TaskState.FAILED.value, finished, end.error, None, end.attempt_id))
                failures.append((TaskState.FAILED.value, finished, end.error, pipeline, end.task))
            else:
                closed.append((TaskState.SUCCEEDED.value, finished, None, output.rows, end.attempt_id))
                checkpoints.append((
                    TaskState.SUCCEEDED.value, finished, output.path, output.fingerprint, output.rows, finished,
                    run_id, pipeline, end.task,
                ))
            reads.extend((run_id, end.task, read.stage, read.partition, read.declared) for read in end.reads)
        attempt_ids: list[int] = []
        with self._writing() as connection, _driver_cursor(connection) as cursor:
            for statement, rows in (
                (statements.close_attempt, closed),
                (statements.checkpoint, checkpoints),
                (statements.fail, failures),
                (statements.reads, reads),
            ):
                if len(rows) == 1:
                    cursor.execute(statement, rows[0])
                elif rows:
                    cursor.executemany(statement, rows)
            self._store.failures.keep_task_tracebacks(
                connection, [(end.attempt_id, end.traceback) for end in ended if end.traceback is not None]
            )
            if blocked:
                self._block(connection, run_id, blocked)
            if started:
                now = to_driver(self.clock.now())
                running = TaskState.RUNNING.value
                cursor.executemany(statements.start, [(pipeline, task, running, run_id, now) for task, _ in started])
                for task, attempt in started:
                    cursor.execute(statements.open_attempt, (run_id, pipeline, task, attempt, running, now))
                    attempt_ids.append(cursor.fetchall()[0][0])
        return attempt_ids

    def _block(self, connection: sa.Connection, run_id: int, blocked: Mapping[str, str]) -> None:
        # Rare (only after a failure), so plain SQLAlchemy Core.
        now = self.clock.now()
        insert = self._store.dialect_insert(pipeline_tasks)
        upsert = insert.on_conflict_do_update(
            index_elements=["pipeline", "task"],
            set_={
                "state": insert.excluded.state,
                "run_id": insert.excluded.run_id,
                "finished_at": insert.excluded.finished_at,
                "error": insert.excluded.error,
            },
        )
        rows = [
            {
                "pipeline": self.pipeline, "task": task, "state": TaskState.BLOCKED, "attempts": 0,
                "run_id": run_id, "started_at": None, "finished_at": now, "error": reason,
            }
            for task, reason in blocked.items()
        ]
        connection.execute(upsert, rows)


@dataclass(frozen=True, kw_only=True)
class PipelineStatus:
    """Every task's state (in topological order) and the stale tasks (succeeded before an upstream's rerun)."""

    pipeline: str
    tasks: dict[str, TaskState]
    stale: tuple[str, ...]

    @property
    def counts(self) -> dict[TaskState, int]:
        """How many tasks are in each state."""
        counts = dict.fromkeys(TaskState, 0)
        for state in self.tasks.values():
            counts[state] += 1
        return counts

    @property
    def green(self) -> bool:
        """Every task succeeded and none is stale."""
        return not self.stale and all(state is TaskState.SUCCEEDED for state in self.tasks.values())

    def to_json(self) -> dict[str, Any]:
        """``{tasks: {T: state}, stale}`` as ``vardiya pipeline status --json`` prints it."""
        return {"tasks": {task: state.value for task, state in self.tasks.items()}, "stale": list(self.stale)}


def status(store: Store, pipeline: Pipeline | TaskGraph) -> PipelineStatus:
    """The state of every task of ``pipeline`` and which succeeded tasks are stale.

    Stale: a task ``D`` whose current output was materialized by an earlier run than the current output
    of a task it depends on, through a declared edge or through a read recorded when ``D`` ran (the
    latter catches what a missing edge would hide).
    """
    graph = pipeline if isinstance(pipeline, TaskGraph) else build_graph(pipeline)
    state = PipelineState(store, graph.pipeline)
    records = state.tasks()
    recorded_reads = state.materialized_reads()
    names = graph.names
    tasks: dict[str, TaskState] = {}
    stale: list[str] = []
    for task in graph.order_ids:
        name = names[task]
        record = records.get(name)
        tasks[name] = record.state if record is not None else TaskState.PENDING
        if record is None or record.state is not TaskState.SUCCEEDED or record.materialized_run_id is None:
            continue
        upstream = {names[before] for before in graph.predecessors[task]}
        upstream.update(recorded_reads.get(name, ()))
        for before in upstream:
            other = records.get(before)
            if other is not None and (other.materialized_run_id or 0) > record.materialized_run_id:
                stale.append(name)
                break
    return PipelineStatus(pipeline=graph.pipeline, tasks=tasks, stale=tuple(stale))
