"""Where pipeline tasks and runs stand, and how a task is named: pure values the store and the runner share.

The store keeps these states in its pipeline tables; the runner, the reports and the sensors decide by
them. They sit at the top of the package, beside ``clock`` and ``errors``, because both sides need
them: code deciding by a state imports neither the store nor the pipeline package (whose ``__init__``
loads the runner, which uses the store) to reach them.
"""

from __future__ import annotations

import enum

__all__ = ["RunState", "TaskState", "task_name"]


def task_name(stage: str, key: str) -> str:
    """``stage@key``, or the stage name alone for the one partition of an unpartitioned stage."""
    return f"{stage}@{key}" if key else stage


class TaskState(str, enum.Enum):
    """Where a pipeline task (``stage@partition``) stands.

    ``blocked``: an upstream task failed in the run, so this one could not start. ``skipped``: the run
    found it already done; it is a run's verdict and never stored (a done task stays ``succeeded``).
    """

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    BLOCKED = "blocked"
    SKIPPED = "skipped"


class RunState(str, enum.Enum):
    """How a pipeline run ended; ``interrupted`` when its process died and a later run found it open."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
