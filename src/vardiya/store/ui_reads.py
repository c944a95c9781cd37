"""Reads the dashboard needs that no command made yet: one task's failed attempts with tracebacks.

``pipeline_task_runs`` is read by (pipeline, task), newest first, bounded by ``limit``, so a pipeline
with a long history answers a task page without reading the other tasks' rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from .schema import TaskState, pipeline_task_runs

if TYPE_CHECKING:
    from .api import Store

__all__ = ["TaskFailure", "task_failures"]


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
