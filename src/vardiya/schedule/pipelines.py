"""A pipeline as the scheduler and workers run it: where its outputs go, its triggers, its run settings.

``App.add_pipeline(pipeline, root=..., triggers=[...])`` makes one. Everything is checked there: the
graph builds (no cycle, no unknown stage), every trigger's stages exist and share one partition set
(a trigger starts one partition of them at a time), a ``PeriodClose`` needs day or month partitions,
and trigger names are unique (each is named by its kind and position when not given a name).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigurationError
from ..pipeline.graph import TaskGraph, build_graph, task_name
from ..pipeline.partitions import PartitionKind, PartitionSet, Unpartitioned
from ..pipeline.stages import Pipeline
from .triggers import PeriodClose, Trigger

__all__ = ["ScheduledPipeline"]

_TIME_KINDS = (PartitionKind.DAILY, PartitionKind.MONTHLY)


@dataclass(frozen=True, kw_only=True)
class ScheduledPipeline:
    """A pipeline with its output root, triggers and the settings of the runs its triggers start.

    A triggered run that ends with failed or blocked tasks fails its work item, which the engine
    retries ``retry_wait_s`` later (a retry runs only what is not done) up to ``max_attempts`` times,
    then dead-letters it (``vardiya dlq``).
    """

    pipeline: Pipeline
    root: str
    triggers: tuple[Trigger, ...] = ()
    concurrency: int = 1
    strict: bool = False
    max_attempts: int = 3
    retry_wait_s: float = 60.0
    graph: TaskGraph = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.pipeline, Pipeline):
            raise ConfigurationError(f"add_pipeline needs a Pipeline, got {self.pipeline!r}")
        object.__setattr__(self, "root", os.path.abspath(os.fspath(self.root)))
        object.__setattr__(self, "graph", build_graph(self.pipeline))
        for label, value, low in (("concurrency", self.concurrency, 1), ("max_attempts", self.max_attempts, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigurationError(f"pipeline {self.name!r}: {label} must be a whole number >= {low}, got {value!r}")
        if isinstance(self.retry_wait_s, bool) or not isinstance(self.retry_wait_s, int | float) or self.retry_wait_s < 0:
            raise ConfigurationError(f"pipeline {self.name!r}: retry_wait_s must be a number >= 0, got {self.retry_wait_s!r}")
        named: list[Trigger] = []
        counts: dict[str, int] = {}
        given: Iterable[Any] = self.triggers
        for trigger in given:
            if not isinstance(trigger, Trigger):
                raise ConfigurationError(
                    f"pipeline {self.name!r}: {trigger!r} is not a trigger; use Cron, PeriodClose, DataArrival or Upstream"
                )
            counts[trigger.kind] = counts.get(trigger.kind, 0) + 1
            if trigger.name is None:
                trigger = replace(trigger, name=f"{trigger.kind}-{counts[trigger.kind]}")
            if any(other.name == trigger.name for other in named):
                raise ConfigurationError(f"pipeline {self.name!r} has two triggers named {trigger.name!r}")
            self._check(trigger)
            named.append(trigger)
        object.__setattr__(self, "triggers", tuple(named))

    @property
    def name(self) -> str:
        return self.pipeline.name

    def stages_of(self, trigger: Trigger) -> tuple[str, ...]:
        """The stages a trigger starts (all of the pipeline's by default)."""
        return trigger.stages if trigger.stages is not None else tuple(stage.name for stage in self.pipeline.stages)

    def partitions_of(self, trigger: Trigger) -> PartitionSet:
        """The partition set the trigger's stages share (the first partitioned one's)."""
        by_name = {stage.name: stage for stage in self.pipeline.stages}
        sets = [by_name[name].partitions for name in self.stages_of(trigger)]
        partitioned = [partitions for partitions in sets if not isinstance(partitions, Unpartitioned)]
        return partitioned[0] if partitioned else Unpartitioned()

    def time_partitioned(self, trigger: Trigger) -> bool:
        return self.partitions_of(trigger).kind in _TIME_KINDS

    def tasks_for(self, trigger: Trigger, partition: str | None) -> list[str]:
        """The tasks a firing for ``partition`` runs (None: every partition of the trigger's stages)."""
        by_name = {stage.name: stage for stage in self.pipeline.stages}
        tasks = []
        for name in self.stages_of(trigger):
            keys = by_name[name].partitions
            if isinstance(keys, Unpartitioned):
                if partition is None:
                    tasks.append(task_name(name, ""))
            elif partition is None:
                tasks.extend(task_name(name, key) for key in keys)
            elif partition in keys:
                tasks.append(task_name(name, partition))
        return tasks

    def trigger(self, name: str) -> Trigger:
        for trigger in self.triggers:
            if trigger.name == name:
                return trigger
        known = ", ".join(str(trigger.name) for trigger in self.triggers) or "none"
        raise ConfigurationError(f"pipeline {self.name!r} has no trigger {name!r}; its triggers: {known}")

    def _check(self, trigger: Trigger) -> None:
        by_name = {stage.name: stage for stage in self.pipeline.stages}
        for name in self.stages_of(trigger):
            if name not in by_name:
                known = ", ".join(by_name)
                raise ConfigurationError(
                    f"pipeline {self.name!r}: trigger {trigger.name!r} names stage {name!r}, which does not exist; "
                    f"its stages: {known}"
                )
        keys = {
            tuple(by_name[name].partitions)
            for name in self.stages_of(trigger)
            if not isinstance(by_name[name].partitions, Unpartitioned)
        }
        if len(keys) > 1:
            raise ConfigurationError(
                f"pipeline {self.name!r}: trigger {trigger.name!r} starts stages with different partition sets; "
                "give it stages=[...] that share one (a trigger starts one partition at a time)"
            )
        if isinstance(trigger, PeriodClose) and not self.time_partitioned(trigger):
            raise ConfigurationError(
                f"pipeline {self.name!r}: trigger {trigger.name!r} fires when a period closes, but its stages "
                "are not partitioned by day or month; use Cron or DataArrival"
            )
