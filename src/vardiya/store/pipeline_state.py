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
- ``pipeline.state.status`` (built on these tables) lists every task's state and the stale ones: a
  succeeded task is stale when a task it depends on (declared, or recorded as read) was materialized
  by a later run than itself.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import sqlalchemy as sa

from ..clock import Clock
from ..states import RunState, TaskState
from .backend import times_of
from .engine import driver_errors
from .pipeline_reads import PipelineReads, name_chunks
from .schema import pipeline_runs, pipeline_task_runs, pipeline_tasks
from .url import Backend

if TYPE_CHECKING:
    from .api import Store

__all__ = ["AttemptEnd", "OutputFacts", "PipelineState", "ReadFacts"]

INTERRUPTED = "interrupted: the run that started it ended without finishing it (its process was killed?)"


# The statements of a task's transitions, run on the transaction's DBAPI cursor: they run for every
# task, and SQLAlchemy cost far more than the database work (on SQLite, building them with Core took
# about 1 ms per task start and again per checkpoint; even exec_driver_sql adds some 45 us a statement,
# against about 12 us in sqlite3 itself). Values are bound parameters only, converted as the column
# types would convert them (times by the backend's conversion, ``backend.times_of``).
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


class OutputFacts(Protocol):
    """What a checkpoint stores of a task's output (``pipeline.io.Output`` is one)."""

    @property
    def path(self) -> str | None: ...
    @property
    def fingerprint(self) -> str | None: ...
    @property
    def rows(self) -> int | None: ...


class ReadFacts(Protocol):
    """What the lineage stores of one read (``pipeline.io.Read`` is one)."""

    @property
    def stage(self) -> str: ...
    @property
    def partition(self) -> str: ...
    @property
    def declared(self) -> bool: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class AttemptEnd:
    """How one attempt ended, for ``PipelineState.record``: with an ``output`` it succeeded (the checkpoint)."""

    attempt_id: int
    task: str
    finished_at: datetime
    output: OutputFacts | None = None
    error: str | None = None
    reads: tuple[ReadFacts, ...] = ()
    #: a failed attempt's traceback, bounded (``vardiya.tracebacks``)
    traceback: str | None = None


class PipelineState(PipelineReads):
    """The pipeline tables of one store, for one pipeline, timed by ``clock`` (the store's by default)."""

    def __init__(self, store: Store, pipeline: str, *, clock: Clock | None = None) -> None:
        super().__init__(store, pipeline, clock=clock)
        self._held = threading.local()  # a connection ``holding_connection`` keeps for its thread

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
            for chunk in name_chunks(invalidate):
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

    def succeed(
        self, run_id: int, attempt_id: int, task: str, output: OutputFacts, reads: Sequence[ReadFacts] = ()
    ) -> None:
        """The checkpoint: close the attempt and record the task's output, durably, with its reads."""
        end = AttemptEnd(
            attempt_id=attempt_id, task=task, finished_at=self.clock.now(), output=output, reads=tuple(reads)
        )
        self.record(run_id, ended=[end])

    def fail(
        self, run_id: int, attempt_id: int, task: str, error: str, reads: Sequence[ReadFacts] = (),
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
        to_driver = times_of(self._store.backend).time
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
