"""A pipeline's status: every task's state and the stale ones, judged from the store's pipeline tables.

The tables themselves are the store's (``store.pipeline_state``, ``store.pipeline_reads``); their
records are re-exported here, where they have always been imported from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..states import TaskState
from ..store.pipeline_reads import PipelineReads, RunRecord, TaskAttempt, TaskCheckpoint, TaskRead, TaskRecord
from ..store.pipeline_state import AttemptEnd, PipelineState
from .graph import TaskGraph, build_graph
from .stages import Pipeline

if TYPE_CHECKING:
    from ..store.api import Store

__all__ = [
    "AttemptEnd",
    "PipelineState",
    "PipelineStatus",
    "RunRecord",
    "TaskAttempt",
    "TaskCheckpoint",
    "TaskRead",
    "TaskRecord",
    "status",
]


_VALUES = {state: state.value for state in TaskState}


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
        values = _VALUES  # a dict lookup per task: an Enum's ``.value`` is a descriptor call
        return {"tasks": {task: values[state] for task, state in self.tasks.items()}, "stale": list(self.stale)}


def status(store: Store, pipeline: Pipeline | TaskGraph) -> PipelineStatus:
    """The state of every task of ``pipeline`` and which succeeded tasks are stale.

    Stale: a task ``D`` whose current output was materialized by an earlier run than the current output
    of a task it depends on, through a declared edge or through a read recorded when ``D`` ran (the
    latter catches what a missing edge would hide).
    """
    graph = pipeline if isinstance(pipeline, TaskGraph) else build_graph(pipeline)
    state = PipelineReads(store, graph.pipeline)
    records = state.task_states()
    recorded_reads = state.materialized_reads()
    names, predecessors, pending, succeeded = graph.names, graph.predecessors, TaskState.PENDING, TaskState.SUCCEEDED
    # The run that materialized each task's output, by id (0: none), so the stale check's loop over
    # every edge compares integers without looking names up.
    materialized_by = [0] * len(names)
    for task, name in enumerate(names):
        record = records.get(name)
        if record is not None and record[1] is not None:
            materialized_by[task] = record[1]
    tasks: dict[str, TaskState] = {}
    stale: list[str] = []
    for task in graph.order_ids:
        name = names[task]
        record = records.get(name)
        if record is None:
            tasks[name] = pending
            continue
        task_state, materialized = record
        tasks[name] = task_state
        if task_state is not succeeded or materialized is None:
            continue
        for before in predecessors[task]:
            if materialized_by[before] > materialized:
                stale.append(name)
                break
        else:
            for read in recorded_reads.get(name, ()):
                other = records.get(read)
                if other is not None and (other[1] or 0) > materialized:
                    stale.append(name)
                    break
    return PipelineStatus(pipeline=graph.pipeline, tasks=tasks, stale=tuple(stale))
