"""Running a pipeline: plan the tasks of a selection, run them in topological order, checkpoint each.

Planning (pure, before anything is written)
    The selection is every task, or the tasks named, or a partition range, or both. A selected task
    whose upstream is neither selected nor done is either planned too, with its own missing upstream
    (``plan_upstream=True``, the default), or the run is refused with an ``InvalidInput`` naming them:
    a consumption for 2026-07 never runs without clean@2026-06 and silently yields zero rows. Done means
    checkpointed as succeeded with its output file still there (a task that produced no output has
    none to look for); done tasks are ``skipped``.

Running
    Up to ``concurrency`` tasks at once. A task starts when every upstream has succeeded, in this run
    or an earlier one. A failure blocks exactly its descendants; independent tasks keep running, unless
    ``fail_fast`` stops launching at the first failure (the unlaunched tasks stay ``pending``). A
    stage's ``retries`` and ``retry_wait_s`` apply to errors of its code; errors vardiya raises for a
    declaration (``ConfigurationError``, e.g. ``UndeclaredRead``) and injected drills are final.

    The coordinator (the caller's thread) writes the store in waves, one transaction each: the
    attempts that ended since the last wave (a success is the checkpoint), the tasks a failure blocks,
    and the tasks that start now. A task's checkpoint is therefore committed before, or with, the start
    of every task that depends on it, and a task is marked running before its code runs. A task that
    finished but whose wave never committed (the process was killed in between) is found ``running``
    by the next run, which runs it again; its output was published atomically at its one path, so the
    second publish replaces the first. Tasks run in a thread pool when ``concurrency`` is above 1; at 1
    they run in the caller's thread, which saves a thread hand-over per task (an interrupt then stops
    the running task, which the next run runs again).

The ways in
    ``run_pipeline`` (a selection), ``resume`` (the failed, blocked and never-run tasks of the last
    run's selection), ``rerun`` (a task and all its descendants, invalidated first, nothing else) and
    ``backfill`` (a partition range with a bound on the tasks running at once). ``status`` is in
    ``state``. Every one returns a ``RunResult``.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..clock import Clock
from ..errors import ConfigurationError, InvalidInput
from ..sla import log_miss, over_sla
from ..states import RunState, TaskState
from ..store.failures import FailureFamily, SlaMiss
from ..tracebacks import format_traceback
from .graph import TaskGraph, build_graph
from .impact import descendants
from .io import Read, TaskContext, UndeclaredReadWarning, publish, task_output_path
from .options import RunMode, RunOptions, task_names
from .selection import TaskPlan, in_range, partition_range, plan_tasks
from .stages import Pipeline, Stage
from .state import AttemptEnd, PipelineState, TaskCheckpoint

if TYPE_CHECKING:
    from ..store.api import Store

__all__ = [
    "Execution", "Progress", "RunMode", "RunOptions", "RunPreview", "RunResult", "backfill", "rerun", "resume",
    "resume_preview", "run_pipeline",
]

# Told (tasks finished, tasks to run) as each task ends, in the coordinator's thread: a progress bar.
Progress = Callable[[int, int], None]

DRILL = "injected failure (drill)"


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """What a run did, task names in topological order; ``ran`` is every task attempted (succeeded + failed)."""

    run_id: int
    pipeline: str
    ran: tuple[str, ...]
    succeeded: tuple[str, ...]
    failed: tuple[str, ...]
    blocked: tuple[str, ...]
    skipped: tuple[str, ...]
    #: Not launched because ``fail_fast`` stopped the run (they are neither failed nor blocked).
    pending: tuple[str, ...] = ()
    #: The last error of each failed task.
    errors: Mapping[str, str] = field(default_factory=dict)
    #: Reads the declared graph does not explain (warned about, or failing their task in strict mode).
    undeclared_reads: tuple[Read, ...] = ()

    @property
    def ok(self) -> bool:
        """Every planned task is done: nothing failed, blocked or left pending."""
        return not (self.failed or self.blocked or self.pending)

    def to_json(self) -> dict[str, Any]:
        """``{run_id, ran, succeeded, failed, blocked, skipped, ...}`` as ``pipeline run --json`` prints it."""
        return {
            "run_id": self.run_id,
            "ran": list(self.ran),
            "succeeded": list(self.succeeded),
            "failed": list(self.failed),
            "blocked": list(self.blocked),
            "skipped": list(self.skipped),
            "pending": list(self.pending),
            "errors": dict(self.errors),
            "undeclared_reads": [read.to_json() for read in self.undeclared_reads],
        }


@dataclass(frozen=True, kw_only=True)
class Execution:
    """How the tasks of one execution ended, as task ids (``RunResult`` names them in topological order)."""

    succeeded: tuple[int, ...]
    failed: tuple[int, ...]
    blocked: tuple[int, ...]
    #: Not launched: ``fail_fast`` stopped the run first.
    pending: tuple[int, ...]
    #: The last error of each failed task, by name.
    errors: Mapping[str, str]
    #: Reads the declared graph does not explain, as the tasks made them.
    reads: tuple[Read, ...]

    @property
    def ok(self) -> bool:
        return not (self.failed or self.blocked or self.pending)


# -- planning -----------------------------------------------------------------------------------------


def _done(graph: TaskGraph, records: Mapping[str, TaskCheckpoint], root: str) -> set[int]:
    """Tasks checkpointed as succeeded whose output (if they produced one) is still where it belongs."""
    done: set[int] = set()
    names, keys, succeeded = graph.names, graph.partition_keys, TaskState.SUCCEEDED
    for number, stage in enumerate(graph.stages):  # ids run stage by stage: no stage lookup per task
        for task in range(graph.starts[number], graph.starts[number + 1]):
            record = records.get(names[task])
            if record is None or record.state is not succeeded:
                continue
            if not record.has_output:
                done.add(task)  # it returned None: there is no file to look for
            elif os.path.exists(task_output_path(root, graph.pipeline, stage.name, keys[task])):
                done.add(task)
    return done


# -- running ------------------------------------------------------------------------------------------


class _Runner:
    """One run's execution: the coordinator (caller's thread) and the tasks (pool threads, or inline)."""

    def __init__(
        self, *, graph: TaskGraph, state: PipelineState, run_id: int, root: str, strict: bool,
        inject: frozenset[str], clock: Clock, without_output: set[str], progress: Progress | None = None,
        store: Store,
    ) -> None:
        self.graph, self.state, self.run_id, self.root = graph, state, run_id, root
        self.store = store
        self.progress = progress
        self.strict, self.inject, self.clock = strict, inject, clock
        # Tasks whose checkpointed success has no output; only the coordinator changes it, after a commit.
        self.without_output = without_output

    def run_task(self, task: int, attempt_id: int) -> AttemptEnd:
        """Every attempt at one task (the first already recorded as started) until one succeeds or the
        retries are spent; returns how the last ended. A retried attempt's end and the next one's start
        are recorded here, around the wait."""
        graph, clock = self.graph, self.clock
        name = graph.names[task]
        stage = graph.stage_of(name)
        path = task_output_path(self.root, graph.pipeline, stage.name, graph.partition_keys[task])
        attempt = 1
        while True:
            if name in self.inject:
                return AttemptEnd(attempt_id=attempt_id, task=name, finished_at=clock.now(), error=DRILL)
            context = TaskContext(
                graph=graph, task=name, root=self.root, strict=self.strict, without_output=self.without_output
            )
            begun = clock.monotonic()
            try:
                output = publish(path, stage.fn(context), task=name)
            except Exception as error:  # noqa: BLE001 - a stage's failure is recorded, not raised
                message = f"{type(error).__name__}: {error}"
                text = format_traceback(error)
                if isinstance(error, ConfigurationError) or attempt > stage.retries:
                    return AttemptEnd(
                        attempt_id=attempt_id, task=name, finished_at=clock.now(), error=message, reads=context.reads,
                        traceback=text,
                    )
                self.state.fail(self.run_id, attempt_id, name, message, context.reads, traceback=text)
                clock.sleep(stage.retry_wait_s)
                attempt += 1
                attempt_id = self.state.start_attempt(self.run_id, name, attempt)
                continue
            self._check_sla(stage, name, clock.monotonic() - begun)
            return AttemptEnd(
                attempt_id=attempt_id, task=name, finished_at=clock.now(), output=output, reads=context.reads
            )

    def _check_sla(self, stage: Stage, task: str, took_s: float) -> None:
        """Log and count a task that ran longer than its stage's ``sla`` (``vardiya.sla``)."""
        if stage.sla is None or not over_sla(stage.sla, took_s):
            return
        name = f"{self.graph.pipeline}.{stage.name}"
        log_miss("stage", name, task, took_s, stage.sla)
        self.store.failures.sla_missed([
            SlaMiss(
                family=FailureFamily.PIPELINE, name=name, ref=task, expected_ms=stage.sla.total_seconds() * 1000,
                took_ms=took_s * 1000, at=self.clock.now(),
            )
        ])

    def execute(self, to_run: Sequence[int], *, concurrency: int, fail_fast: bool) -> Execution:
        """Run ``to_run`` (topological order) as their upstreams succeed; returns how each ended."""
        graph = self.graph
        names, positions, successors = graph.names, graph.positions, graph.successors
        runnable = set(to_run)
        waiting = {task: sum(1 for before in graph.predecessors[task] if before in runnable) for task in to_run}
        ready = [(positions[task], task) for task in to_run if not waiting[task]]
        heapq.heapify(ready)
        running: dict[Future[AttemptEnd], int] = {}
        succeeded: list[int] = []
        failed: list[int] = []
        blocked: dict[int, str] = {}
        errors: dict[str, str] = {}
        reads: list[Read] = []
        ended: list[AttemptEnd] = []  # since the last wave was recorded
        newly_blocked: dict[str, str] = {}
        stop = False

        def settle(task: int, end: AttemptEnd) -> None:
            nonlocal stop
            ended.append(end)
            if self.progress is not None:
                self.progress(len(succeeded) + len(failed) + 1, len(to_run))
            reads.extend(read for read in end.reads if isinstance(read, Read) and not read.declared)  # the engine's own
            if end.output is not None:
                succeeded.append(task)
                for after in successors[task]:  # they launch in the next wave, with this checkpoint
                    if after in waiting:
                        waiting[after] -= 1
                        if not waiting[after]:
                            heapq.heappush(ready, (positions[after], after))
                return
            failed.append(task)
            errors[end.task] = end.error or ""
            for descendant in descendants(graph, end.task):
                descendant_id = graph.task_id(descendant)
                if descendant_id in runnable and descendant_id not in blocked:
                    blocked[descendant_id] = newly_blocked[descendant] = f"upstream {end.task} failed"
            stop = stop or fail_fast

        def record_wave(launch: Sequence[int] = ()) -> list[int]:
            attempt_ids = self.state.record(
                self.run_id, ended=ended, blocked=newly_blocked, started=[(names[task], 1) for task in launch]
            )
            for end in ended:  # committed: readers may now rely on it
                if end.output is not None and end.output.path is None:
                    self.without_output.add(end.task)
                elif end.output is not None:
                    self.without_output.discard(end.task)
            ended.clear()
            newly_blocked.clear()
            return attempt_ids

        pool = None if concurrency == 1 else ThreadPoolExecutor(
            max_workers=concurrency, thread_name_prefix=f"vardiya-{graph.pipeline}"
        )
        try:
            while True:
                launch: list[int] = []
                while ready and len(running) + len(launch) < concurrency and not stop:
                    launch.append(heapq.heappop(ready)[1])
                attempt_ids = record_wave(launch)
                if pool is None:
                    if not launch:
                        break
                    settle(launch[0], self.run_task(launch[0], attempt_ids[0]))
                    continue
                for task, attempt_id in zip(launch, attempt_ids, strict=True):
                    running[pool.submit(self.run_task, task, attempt_id)] = task
                if not running:
                    break
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in sorted(finished, key=lambda done: positions[running[done]]):
                    settle(running.pop(future), future.result())
        except BaseException:
            if pool is not None:
                # Let the tasks already running finish and checkpoint what ended; launch nothing more.
                pool.shutdown(wait=True, cancel_futures=True)
                for future, task in sorted(running.items(), key=lambda item: positions[item[1]]):
                    if not future.cancelled() and future.exception() is None:
                        settle(task, future.result())
            with contextlib.suppress(Exception):  # the store may be what failed; the error raised says so
                record_wave()
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=True)
        done = {*succeeded, *failed, *blocked}
        return Execution(
            succeeded=tuple(succeeded), failed=tuple(failed), blocked=tuple(blocked),
            pending=tuple(task for task in to_run if task not in done), errors=errors, reads=tuple(reads),
        )


# -- the ways in --------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Planned:
    """A run planned against the store's checkpoints, before anything is written."""

    state: PipelineState
    records: Mapping[str, TaskCheckpoint]
    plan: TaskPlan
    invalidate: list[str]
    without_output: set[str]


@dataclass(frozen=True, kw_only=True)
class RunPreview:
    """What a run would do, planned exactly as it will be and nothing written: the dry run of
    ``vardiya pipeline resume`` (and the dashboard's preview). Task names in topological order."""

    pipeline: str
    mode: RunMode
    #: The run a resume continues.
    resumes: int | None
    #: The tasks the run would run (the failed, blocked and never-run ones of the selection, for a resume).
    to_run: tuple[str, ...]
    #: The selection's tasks already done, which it would skip.
    skipped: tuple[str, ...]
    #: The tasks of ``to_run`` that are failed now (the others are blocked or never ran).
    failed: tuple[str, ...]
    root: str

    def to_json(self) -> dict[str, Any]:
        """The preview as ``--dry-run --json`` prints it."""
        return {
            "pipeline": self.pipeline, "mode": self.mode.value, "resumes": self.resumes, "root": self.root,
            "to_run": list(self.to_run), "to_run_count": len(self.to_run), "failed": list(self.failed),
            "skipped": list(self.skipped),
        }


def _plan(store: Store, graph: TaskGraph, options: RunOptions, *, clock: Clock | None) -> _Planned:
    """The plan of a run (refusing bad input with ``InvalidInput``); reads the store, writes nothing."""
    root_text, tasks, partitions, rerun_task = options.root, options.tasks, options.partitions, options.rerun
    state = PipelineState(store, graph.pipeline, clock=clock)
    records = state.checkpoints()
    done = _done(graph, records, root_text)
    without_output = {
        name for name, record in records.items()
        if record.materialized_run_id is not None and not record.has_output
    }
    invalidate: list[str] = []
    if rerun_task is not None:
        selected = {graph.task_id(rerun_task), *(graph.task_id(name) for name in descendants(graph, rerun_task))}
        if options.mode is RunMode.RERUN:
            invalidate = [graph.names[task] for task in graph.order_ids if task in selected]
            done -= selected
    else:
        selected = set(range(len(graph)))
        if tasks is not None:
            if not tasks:
                raise InvalidInput("the task selection is empty; name at least one task, or select none to run all")
            selected = {graph.task_id(name) for name in tasks}
        if partitions is not None:
            selected &= in_range(graph, *partitions)
            if not selected:
                raise InvalidInput(
                    f"none of the selected tasks is in partition range {partitions[0]}..{partitions[1]}"
                )
    plan = plan_tasks(graph, selected, done, plan_upstream=options.plan_upstream)
    for name in options.inject_failure:
        task = graph.task_id(name)  # an unknown name is an error that suggests close names
        if task not in plan.to_run:
            why = "already done" if task in plan.planned else "not in the selection"
            raise InvalidInput(
                f"inject_failure names {name}, which this run does not run ({why}); "
                f"drill a task the run runs, or rerun {name} with the drill"
            )
    return _Planned(state=state, records=records, plan=plan, invalidate=invalidate, without_output=without_output)


def _start(
    store: Store, graph: TaskGraph, options: RunOptions, *, clock: Clock | None, progress: Progress | None = None
) -> RunResult:
    """Plan (refusing bad input before anything is written), record the run, execute it, report."""
    planned = _plan(store, graph, options, clock=clock)
    state, plan, invalidate, without_output = planned.state, planned.plan, planned.invalidate, planned.without_output
    root_text = options.root
    run_id = state.open_run(options.to_json(), invalidate=invalidate)
    runner = _Runner(
        graph=graph, state=state, run_id=run_id, root=root_text, strict=options.strict,
        inject=frozenset(options.inject_failure), clock=state.clock, without_output=without_output, progress=progress,
        store=store,
    )
    try:
        with state.holding_connection():
            outcome = runner.execute(plan.to_run, concurrency=options.concurrency, fail_fast=options.fail_fast)
    except BaseException:
        state.close_run(run_id, RunState.INTERRUPTED)
        raise
    state.close_run(run_id, RunState.SUCCEEDED if outcome.ok else RunState.FAILED)
    names, positions = graph.names, graph.positions

    def ordered(ids: Iterable[int]) -> tuple[str, ...]:
        return tuple(names[task] for task in sorted(ids, key=positions.__getitem__))

    reads = tuple(sorted(outcome.reads, key=lambda read: positions[graph.task_id(read.task)]))
    result = RunResult(
        run_id=run_id,
        pipeline=graph.pipeline,
        ran=ordered([*outcome.succeeded, *outcome.failed]),
        succeeded=ordered(outcome.succeeded),
        failed=ordered(outcome.failed),
        blocked=ordered(outcome.blocked),
        skipped=ordered(plan.skipped),
        pending=ordered(outcome.pending),
        errors={name: outcome.errors[name] for name in ordered(outcome.failed)},
        undeclared_reads=reads,
    )
    if not options.strict:
        for read in reads:
            # Warned here, in the caller's thread, once the run is recorded: a warnings filter that
            # turns warnings into errors then cannot leave the run half-written.
            warnings.warn(read.missing_edge or read.read_task, UndeclaredReadWarning, stacklevel=3)
    return result


def _drills(names: str | Iterable[str]) -> tuple[str, ...]:
    return task_names(names, "inject_failure") or ()


def _graph(pipeline: Pipeline | TaskGraph) -> TaskGraph:
    return pipeline if isinstance(pipeline, TaskGraph) else build_graph(pipeline)


def run_pipeline(
    store: Store,
    pipeline: Pipeline | TaskGraph,
    *,
    root: str | os.PathLike[str],
    partitions: tuple[str, str] | str | None = None,
    tasks: str | Iterable[str] | None = None,
    concurrency: int = 1,
    fail_fast: bool = False,
    strict: bool = False,
    inject_failure: str | Iterable[str] = (),
    plan_upstream: bool = True,
    clock: Clock | None = None,
    started_by: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """Run the tasks of a selection that are not done; outputs go under ``root``.

    ``partitions`` is ``(first, last)`` or ``"first..last"``; ``tasks`` names tasks. ``strict`` fails a
    task that reads what its declared graph does not explain; ``inject_failure`` names tasks that fail
    as a drill without running their code. ``started_by`` (a trigger, its planned time) is kept with the
    run for ``vardiya pipeline triggers``. Bad input raises ``InvalidInput`` before anything is written.
    """
    options = RunOptions(
        mode=RunMode.RUN, root=os.fspath(root), partitions=partition_range(partitions), tasks=task_names(tasks),
        concurrency=concurrency, fail_fast=fail_fast, strict=strict, inject_failure=_drills(inject_failure),
        plan_upstream=plan_upstream, started_by=started_by or None,
    )
    return _start(store, _graph(pipeline), options, clock=clock, progress=progress)


def resume(
    store: Store,
    pipeline: Pipeline | TaskGraph,
    *,
    root: str | os.PathLike[str] | None = None,
    concurrency: int | None = None,
    fail_fast: bool | None = None,
    strict: bool | None = None,
    clock: Clock | None = None,
) -> RunResult:
    """Run the failed, blocked and never-run tasks of the last run's selection (done ones are skipped).

    The selection, root and settings are the last run's unless given; its drills are not repeated.
    """
    graph = _graph(pipeline)
    options = _resume_options(store, graph, root=root, concurrency=concurrency, fail_fast=fail_fast, strict=strict,
                              clock=clock)
    return _start(store, graph, options, clock=clock)


def resume_preview(
    store: Store,
    pipeline: Pipeline | TaskGraph,
    *,
    root: str | os.PathLike[str] | None = None,
    clock: Clock | None = None,
) -> RunPreview:
    """What ``resume`` would run now, planned as ``resume`` plans it, with nothing written."""
    graph = _graph(pipeline)
    options = _resume_options(store, graph, root=root, concurrency=None, fail_fast=None, strict=None, clock=clock)
    planned = _plan(store, graph, options, clock=clock)
    names, plan, records = graph.names, planned.plan, planned.records
    to_run = tuple(names[task] for task in plan.to_run)
    return RunPreview(
        pipeline=graph.pipeline, mode=options.mode, resumes=options.resumes, root=options.root, to_run=to_run,
        skipped=tuple(names[task] for task in plan.skipped),
        failed=tuple(name for name in to_run if name in records and records[name].state is TaskState.FAILED),
    )


def _resume_options(
    store: Store, graph: TaskGraph, *, root: str | os.PathLike[str] | None, concurrency: int | None,
    fail_fast: bool | None, strict: bool | None, clock: Clock | None,
) -> RunOptions:
    """The options of a resume: the last run's selection and settings unless given."""
    last = PipelineState(store, graph.pipeline, clock=clock).last_run()
    if last is None:
        raise InvalidInput(f"pipeline {graph.pipeline!r} has no run to resume; start one with a run first")
    overrides: dict[str, Any] = {
        name: value
        for name, value in (
            ("root", None if root is None else os.fspath(root)), ("concurrency", concurrency),
            ("fail_fast", fail_fast), ("strict", strict),
        )
        if value is not None
    }
    # The last run's selection and settings, its drills and its trigger left out: a resume is its own run.
    return replace(
        RunOptions.from_json(last.options), mode=RunMode.RESUME, inject_failure=(), started_by=None, resumes=last.id,
        **overrides,
    )


def rerun(
    store: Store,
    pipeline: Pipeline | TaskGraph,
    task: str,
    *,
    root: str | os.PathLike[str],
    concurrency: int = 1,
    fail_fast: bool = False,
    strict: bool = False,
    inject_failure: str | Iterable[str] = (),
    clock: Clock | None = None,
) -> RunResult:
    """Invalidate ``task`` and every descendant, then run exactly that set.

    An upstream of the set that is not done is refused (``InvalidInput``), never planned: a rerun runs
    its set and nothing else.
    """
    graph = _graph(pipeline)
    graph.task_id(task)  # an unknown name is an error that suggests close names
    options = RunOptions(
        mode=RunMode.RERUN, root=os.fspath(root), rerun=task, concurrency=concurrency, fail_fast=fail_fast,
        strict=strict, inject_failure=_drills(inject_failure), plan_upstream=False,
    )
    return _start(store, graph, options, clock=clock)


def backfill(
    store: Store,
    pipeline: Pipeline | TaskGraph,
    first: str,
    last: str,
    *,
    root: str | os.PathLike[str],
    max_concurrent: int = 1,
    fail_fast: bool = False,
    strict: bool = False,
    inject_failure: str | Iterable[str] = (),
    plan_upstream: bool = True,
    clock: Clock | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """Run the tasks of partitions ``first..last`` that are not done, at most ``max_concurrent`` at once."""
    options = RunOptions(
        mode=RunMode.BACKFILL, root=os.fspath(root), partitions=(first, last), concurrency=max_concurrent,
        fail_fast=fail_fast, strict=strict, inject_failure=_drills(inject_failure), plan_upstream=plan_upstream,
    )
    return _start(store, _graph(pipeline), options, clock=clock, progress=progress)
