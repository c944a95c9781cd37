"""A pipeline run's options: one frozen value, checked when made, and what the store keeps for the run.

Every way in (``run_pipeline``, ``resume``, ``rerun``, ``backfill``) builds a ``RunOptions`` and hands
it to the one place that plans and runs; the run's row keeps ``to_json()`` of it, and ``resume`` reads
it back with ``from_json`` to plan the same selection again. The clock and a progress callback are not
options: they are how this process runs, not what the run is.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..errors import InvalidInput
from .selection import partition_range

__all__ = ["RunMode", "RunOptions", "task_names"]


class RunMode(StrEnum):
    """How a run was started; stored with its options."""

    RUN = "run"
    RESUME = "resume"
    RERUN = "rerun"
    BACKFILL = "backfill"


def task_names(value: str | Iterable[str] | None, what: str = "tasks") -> tuple[str, ...] | None:
    """Task names given as one name or many, as a tuple (None stays None: no selection)."""
    if value is None:
        return None
    names = (value,) if isinstance(value, str) else tuple(value)
    for name in names:
        if not isinstance(name, str):
            raise InvalidInput(f"{what} must name tasks as strings, got {name!r}")
    return names


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """What a pipeline run was asked to do: its selection and its settings."""

    mode: RunMode = RunMode.RUN
    #: Where outputs go; kept absolute, so a resume from another directory finds the same files.
    root: str
    #: ``(first, last)`` partitions (``"first..last"`` and ``"first"`` are accepted), or every one.
    partitions: tuple[str, str] | None = None
    #: The tasks named, or every task.
    tasks: tuple[str, ...] | None = None
    #: The task a rerun invalidates and reruns with its descendants.
    rerun: str | None = None
    #: Tasks running at once.
    concurrency: int = 1
    #: Stop launching at the first failure.
    fail_fast: bool = False
    #: Fail a task that reads what its declared graph does not explain.
    strict: bool = False
    #: Tasks that fail as a drill without running their code.
    inject_failure: tuple[str, ...] = ()
    #: Plan a selected task's missing upstream too, instead of refusing the run.
    plan_upstream: bool = True
    #: The trigger that started the run and its planned time (``vardiya pipeline triggers``).
    started_by: Mapping[str, Any] | None = None
    #: The run a resume continues.
    resumes: int | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "mode", RunMode(self.mode))
        except ValueError:
            modes = ", ".join(mode.value for mode in RunMode)
            raise InvalidInput(f"a run's mode is one of {modes}, got {self.mode!r}") from None
        concurrency = self.concurrency
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            what = "max_concurrent" if self.mode is RunMode.BACKFILL else "concurrency"
            raise InvalidInput(f"{what} must be a whole number of at least 1, got {concurrency!r}")
        if not isinstance(self.root, str | os.PathLike) or not os.fspath(self.root):
            raise InvalidInput(f"a pipeline run needs a root directory for its outputs, got {self.root!r}")
        object.__setattr__(self, "root", os.path.abspath(os.fspath(self.root)))
        object.__setattr__(self, "partitions", partition_range(self.partitions))
        object.__setattr__(self, "tasks", task_names(self.tasks, "tasks"))
        object.__setattr__(self, "inject_failure", task_names(self.inject_failure, "inject_failure") or ())
        for flag in ("fail_fast", "strict", "plan_upstream"):
            if not isinstance(getattr(self, flag), bool):
                raise InvalidInput(f"{flag} must be True or False, got {getattr(self, flag)!r}")
        if self.started_by is not None:
            object.__setattr__(self, "started_by", dict(self.started_by))

    def to_json(self) -> dict[str, Any]:
        """The options as the run's row keeps them (and ``vardiya pipeline triggers`` reads them)."""
        document: dict[str, Any] = {
            "mode": self.mode.value,
            "root": self.root,
            "partitions": list(self.partitions) if self.partitions is not None else None,
            "tasks": list(self.tasks) if self.tasks is not None else None,
            "rerun": self.rerun,
            "concurrency": self.concurrency,
            "fail_fast": self.fail_fast,
            "strict": self.strict,
            "inject_failure": list(self.inject_failure),
            "plan_upstream": self.plan_upstream,
        }
        if self.started_by:
            document["started_by"] = dict(self.started_by)
        if self.resumes is not None:
            document["resumes"] = self.resumes
        return document

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> RunOptions:
        """The options a run's row keeps, as ``to_json`` wrote them (a field it lacks takes its default)."""
        partitions = document.get("partitions")
        return cls(
            mode=RunMode(document.get("mode", RunMode.RUN)),
            root=document["root"],
            partitions=(partitions[0], partitions[1]) if partitions else None,
            tasks=document.get("tasks"),
            rerun=document.get("rerun"),
            concurrency=int(document.get("concurrency", 1)),
            fail_fast=bool(document.get("fail_fast", False)),
            strict=bool(document.get("strict", False)),
            inject_failure=document.get("inject_failure") or (),
            plan_upstream=bool(document.get("plan_upstream", True)),
            started_by=document.get("started_by") or None,
            resumes=document.get("resumes"),
        )
