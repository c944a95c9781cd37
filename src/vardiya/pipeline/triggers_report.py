"""``vardiya pipeline triggers``: per task, how many times and when it ran, and what started each run.

Read from the store: every attempt of every task (``pipeline_task_runs``, with the rows it published)
joined with its run's options, where a triggered run keeps its trigger, kind and planned time and a
run by hand has none. An attempt that succeeded with 0 rows is an *empty run*: the symptom of a
schedule that fires before the partition's data exists, which a data-arrival trigger avoids. The
report names such tasks so it is visible, instead of a green run over nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..states import TaskState
from .graph import TaskGraph
from .state import PipelineState

if TYPE_CHECKING:
    from ..store.api import Store

__all__ = ["TaskRuns", "TriggerRun", "TriggersReport", "triggers_report"]

MANUAL = "manual"


@dataclass(frozen=True, kw_only=True)
class TriggerRun:
    """One attempt at a task: its run, what started that run, when, how it ended, the rows it published."""

    run_id: int
    started_by: str
    trigger_kind: str
    planned_at: str | None
    started_at: str
    finished_at: str | None
    state: str
    rows: int | None

    @property
    def empty(self) -> bool:
        return self.state == TaskState.SUCCEEDED.value and self.rows == 0

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "empty": self.empty}


@dataclass(kw_only=True)
class TaskRuns:
    task: str
    runs: list[TriggerRun] = field(default_factory=list)

    @property
    def by_trigger(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for run in self.runs:
            counts[run.started_by] = counts.get(run.started_by, 0) + 1
        return counts

    @property
    def empty_runs(self) -> int:
        return sum(1 for run in self.runs if run.empty)

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "count": len(self.runs),
            "by_trigger": self.by_trigger,
            "empty_runs": self.empty_runs,
            "first": self.runs[0].started_at if self.runs else None,
            "last": self.runs[-1].started_at if self.runs else None,
            "runs": [run.to_json() for run in self.runs],
        }


@dataclass(kw_only=True)
class TriggersReport:
    pipeline: str
    tasks: list[TaskRuns]

    @property
    def empty(self) -> list[str]:
        """Tasks with at least one empty run."""
        return [task.task for task in self.tasks if task.empty_runs]

    def to_json(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "tasks": {task.task: task.to_json() for task in self.tasks},
            "runs": sum(len(task.runs) for task in self.tasks),
            "empty": self.empty,
        }


def _started_by(options: Mapping[str, Any]) -> tuple[str, str, str | None]:
    trigger = options.get("started_by") or {}
    if trigger.get("trigger"):
        return str(trigger["trigger"]), str(trigger.get("trigger_kind") or "trigger"), trigger.get("planned_at")
    mode = str(options.get("mode") or "run")
    return (MANUAL if mode == "run" else mode), "manual", None


def triggers_report(store: Store, graph: TaskGraph) -> TriggersReport:
    """Every task of ``graph`` (topological order) with each attempt and what started its run."""
    state = PipelineState(store, graph.pipeline)
    runs = {run.id: run for run in state.runs()}
    per_task: dict[str, TaskRuns] = {name: TaskRuns(task=name) for name in graph.order}
    for attempt in state.history():
        if attempt.task not in per_task:
            continue  # a task the pipeline no longer declares
        run = runs.get(attempt.run_id)
        name, kind, planned = _started_by(run.options if run is not None else {})
        per_task[attempt.task].runs.append(TriggerRun(
            run_id=attempt.run_id, started_by=name, trigger_kind=kind, planned_at=planned,
            started_at=attempt.started_at.isoformat(),
            finished_at=attempt.finished_at.isoformat() if attempt.finished_at else None,
            state=attempt.state.value, rows=attempt.rows,
        ))
    return TriggersReport(pipeline=graph.pipeline, tasks=list(per_task.values()))
