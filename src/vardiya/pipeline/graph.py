"""The task graph: every (stage, partition) as a task, every declared dependency as edges. Pure, no I/O.

``build_graph(pipeline)`` expands a pipeline's declarations into tasks named ``stage@partition`` (an
unpartitioned stage's one task is named ``stage``), resolves each mapping to edges (upstream task ->
downstream task), validates the whole, and sorts it.

Validation
    An upstream name that is not a stage, and a cycle, are ``ConfigurationError``; a cycle is named
    task by task (``a@2026-01 -> b@2026-01 -> a@2026-01``) with the stages it runs through. Cycles are
    judged on tasks, the unit that is scheduled: a stage may read its own previous partition
    (``depends_on={"balance": offset(-1)}`` on ``balance``), which cycles at stage level but not at
    task level, like a running balance. Duplicate stage names are refused by ``Pipeline``.

Order
    Kahn's algorithm; among the tasks ready at once, the first-declared stage goes first, then the
    earlier partition. That is the smallest task id first, since ids are laid out stage by stage in
    declaration order and partition by partition within a stage: the order is deterministic and
    reads like the declarations.

Scale
    Tasks are integer ids with adjacency lists (tuples indexed by id); names exist for the public API
    only. Building 100,000 tasks takes a few seconds: O((V + E) log V), the log from the ready heap.
"""

from __future__ import annotations

import difflib
import heapq
from bisect import bisect_right
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar, cast

from ..errors import ConfigurationError, InvalidInput
from ..states import task_name
from .partitions import Unpartitioned
from .stages import Pipeline, Stage

__all__ = ["Pipeline", "Stage", "TaskGraph", "build_graph", "task_name"]

_SUGGESTIONS = 3

_Derived = TypeVar("_Derived")


@dataclass(frozen=True, kw_only=True, repr=False)
class TaskGraph:
    """Tasks and edges of a pipeline with a topological order; built by ``build_graph``.

    The public methods speak task names. The integer view (``names``, ``predecessors``,
    ``successors``, ``order_ids``; ids are positions in ``names``) is there for code that walks the
    whole graph, such as the impact counts and the runner, and must treat it as read-only.
    """

    pipeline: str
    stages: tuple[Stage, ...]
    #: First task id of each stage, plus the task count at the end: stage s owns ids starts[s]..starts[s+1]-1.
    starts: tuple[int, ...]
    names: tuple[str, ...]
    #: The partition key of each task ("" for an unpartitioned stage).
    partition_keys: tuple[str, ...]
    predecessors: tuple[tuple[int, ...], ...]
    successors: tuple[tuple[int, ...], ...]
    order_ids: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ids", {name: task for task, name in enumerate(self.names)})
        object.__setattr__(self, "_derived", {})

    def derived(self, key: Hashable, build: Callable[[TaskGraph], _Derived]) -> _Derived:
        """``build(self)``, built on the first call for ``key`` and kept with the graph after that.

        For what depends on the graph alone (the grid's layout, every task's blast radius, a page's
        task table without its states): the graph never changes, so nothing kept here can go stale,
        and an app's graph, built once at load, then pays for it once rather than on every request.
        ``key`` names what ``build`` makes (the module that builds it, by convention). Two threads may
        both build it the first time; the first one kept is the one every call returns.
        """
        kept: dict[Hashable, Any] = self.__dict__["_derived"]
        if key not in kept:
            kept.setdefault(key, build(self))
        return cast(_Derived, kept[key])

    @cached_property
    def edge_count(self) -> int:
        """How many edges (upstream task -> downstream task) the graph has."""
        return sum(map(len, self.predecessors))

    def __repr__(self) -> str:
        return (
            f"TaskGraph(pipeline={self.pipeline!r}, stages={len(self.stages)}, "
            f"tasks={len(self.names)}, edges={self.edge_count})"
        )

    def __len__(self) -> int:
        return len(self.names)

    # -- names ---------------------------------------------------------------------------------------

    @property
    def stage_names(self) -> list[str]:
        """The stage names in declaration order."""
        return [stage.name for stage in self.stages]

    @property
    def order(self) -> list[str]:
        """Every task name in topological order."""
        names = self.names
        return [names[task] for task in self.order_ids]

    @cached_property
    def positions(self) -> tuple[int, ...]:
        """The position of each task id in ``order_ids``."""
        positions = [0] * len(self.names)
        for position, task in enumerate(self.order_ids):
            positions[task] = position
        return tuple(positions)

    @property
    def ids(self) -> Mapping[str, int]:
        """Every task's id by name, for loops over many names (``task_id`` explains an unknown one)."""
        ids: Mapping[str, int] = self.__dict__["_ids"]
        return ids

    def task_id(self, name: str) -> int:
        """The id of a task name; an unknown name is an error that suggests close names."""
        task: int | None = self.__dict__["_ids"].get(name)
        if task is None:
            raise InvalidInput(self._unknown_task_message(name))
        return task

    def stage_of(self, name: str) -> Stage:
        """The stage a task belongs to."""
        return self.stages[bisect_right(self.starts, self.task_id(name)) - 1]

    def partition_of(self, name: str) -> str:
        """The partition key of a task (``""`` for an unpartitioned stage)."""
        return self.partition_keys[self.task_id(name)]

    def upstream(self, name: str) -> list[str]:
        """The tasks ``name`` reads directly, by id (declaration order)."""
        return [self.names[task] for task in self.predecessors[self.task_id(name)]]

    def downstream(self, name: str) -> list[str]:
        """The tasks that read ``name`` directly, by id (declaration order)."""
        return [self.names[task] for task in self.successors[self.task_id(name)]]

    def edges(self) -> Iterator[tuple[str, str]]:
        """Every edge as (upstream task, downstream task), by downstream id then upstream id."""
        names = self.names
        for task, upstream in enumerate(self.predecessors):
            for before in upstream:
                yield names[before], names[task]

    # -- variants and output -------------------------------------------------------------------------

    def variant_without_cross_partition_edges(self) -> TaskGraph:
        """The same tasks keeping only the edges between equal partition keys.

        This is the graph a scheduler sees when the cross-period edges are forgotten: it still sorts
        and runs, only its blast radii are wrong; comparing the two shows what the missing edge costs.
        """
        keys = self.partition_keys
        kept = tuple(
            tuple(before for before in upstream if keys[before] == keys[task])
            for task, upstream in enumerate(self.predecessors)
        )
        return _assemble(self.pipeline, self.stages, self.starts, self.names, keys, kept)

    def to_json(self) -> dict[str, Any]:
        """``{stages, tasks, edges, order}`` as ``vardiya pipeline graph --json`` prints it."""
        return {
            "stages": self.stage_names,
            "tasks": len(self.names),
            "edges": self.edge_count,
            "order": self.order,
        }

    def _unknown_task_message(self, name: str) -> str:
        stage_name, _, key = str(name).partition("@")
        by_name = {stage.name: stage for stage in self.stages}
        if stage_name in by_name:
            close_stages, where = [stage_name], ""
            partitions = by_name[stage_name].partitions
            if not isinstance(partitions, Unpartitioned):
                where = f"stage {stage_name!r} has partitions {partitions.span}; "
        else:
            close_stages, where = difflib.get_close_matches(stage_name, by_name, n=_SUGGESTIONS), ""
        close: list[str] = []
        for candidate in close_stages:
            partitions = by_name[candidate].partitions
            if isinstance(partitions, Unpartitioned):
                close.append(candidate)
            elif key in partitions:
                close.append(task_name(candidate, key))
            else:
                keys = difflib.get_close_matches(key, partitions.keys, n=_SUGGESTIONS, cutoff=0.5)
                close.extend(task_name(candidate, close_key) for close_key in keys)
        if close:
            hint = "did you mean " + " or ".join(repr(task) for task in close[:_SUGGESTIONS]) + "?"
        else:
            examples = ", ".join(repr(self.names[start]) for start in self.starts[:-1][:_SUGGESTIONS])
            hint = f"tasks are named stage@partition, e.g. {examples}"
        return f"pipeline {self.pipeline!r} has no task {name!r}; {where}{hint}"


def build_graph(pipeline: Pipeline) -> TaskGraph:
    """Expand, validate and sort a pipeline: the pure graph the runner, impact and the CLI share."""
    stages = pipeline.stages
    if not stages:
        raise ConfigurationError(
            f"pipeline {pipeline.name!r} has no stages; declare one with @pipeline.stage"
        )
    index = {stage.name: number for number, stage in enumerate(stages)}
    for stage in stages:
        for upstream in stage.depends_on:
            if upstream not in index:
                close = difflib.get_close_matches(upstream, index, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ConfigurationError(
                    f"stage {stage.name!r} depends on {upstream!r}, which is not a stage of pipeline "
                    f"{pipeline.name!r}; {hint}stages are {', '.join(index)}"
                )
    starts = [0]
    for stage in stages:
        starts.append(starts[-1] + len(stage.partitions))
    names: list[str] = []
    keys: list[str] = []
    for stage in stages:
        keys.extend(stage.partitions.keys)
        names.extend(task_name(stage.name, key) for key in stage.partitions.keys)
    predecessors: list[tuple[int, ...]] = []
    for stage in stages:
        predecessors.extend(_stage_predecessors(stage, stages, index, starts))
    return _assemble(pipeline.name, stages, tuple(starts), tuple(names), tuple(keys), tuple(predecessors))


def _stage_predecessors(
    stage: Stage, stages: Sequence[Stage], index: dict[str, int], starts: Sequence[int]
) -> list[tuple[int, ...]]:
    """The upstream task ids of each of a stage's tasks, sorted, without repeats."""
    resolved: list[tuple[int, list[Sequence[int]]]] = []
    for upstream_name, mappings in stage.upstreams.items():
        upstream = stages[index[upstream_name]]
        for mapping in mappings:
            rows = mapping.resolve(
                stage=stage.name,
                downstream=stage.partitions,
                upstream_stage=upstream_name,
                upstream=upstream.partitions,
            )
            resolved.append((starts[index[upstream_name]], rows))
    if not resolved:
        return [()] * len(stage.partitions)
    if len(resolved) == 1:
        base, rows = resolved[0]
        return [tuple(sorted({base + position for position in row})) for row in rows]
    merged: list[tuple[int, ...]] = []
    for partition in range(len(stage.partitions)):
        ids: set[int] = set()
        for base, rows in resolved:
            ids.update(base + position for position in rows[partition])
        merged.append(tuple(sorted(ids)))
    return merged


def _assemble(
    pipeline: str,
    stages: tuple[Stage, ...],
    starts: tuple[int, ...],
    names: tuple[str, ...],
    keys: tuple[str, ...],
    predecessors: tuple[tuple[int, ...], ...],
) -> TaskGraph:
    """Successor lists and the topological order from predecessor lists; a cycle is an error."""
    successors: list[list[int]] = [[] for _ in names]
    for task, upstream in enumerate(predecessors):
        for before in upstream:
            successors[before].append(task)  # ascending: tasks are visited in id order
    waiting = [len(upstream) for upstream in predecessors]
    ready = [task for task, count in enumerate(waiting) if not count]  # ascending: already a heap
    order: list[int] = []
    while ready:
        task = heapq.heappop(ready)
        order.append(task)
        for after in successors[task]:
            waiting[after] -= 1
            if not waiting[after]:
                heapq.heappush(ready, after)
    if len(order) < len(names):
        raise ConfigurationError(_cycle_message(pipeline, stages, starts, names, predecessors, waiting))
    return TaskGraph(
        pipeline=pipeline,
        stages=stages,
        starts=starts,
        names=names,
        partition_keys=keys,
        predecessors=predecessors,
        successors=tuple(map(tuple, successors)),
        order_ids=tuple(order),
    )


def _cycle_message(
    pipeline: str,
    stages: tuple[Stage, ...],
    starts: tuple[int, ...],
    names: tuple[str, ...],
    predecessors: tuple[tuple[int, ...], ...],
    waiting: list[int],
) -> str:
    """Name one cycle among the tasks Kahn's algorithm could not order.

    Every such task still waits on an upstream task that is itself unordered, so walking upstream
    from one of them must come back to a task already seen: the walk from there is a cycle. Taking the
    smallest id at each step makes the named cycle the same on every run.
    """
    task = min(task for task, count in enumerate(waiting) if count)
    seen: dict[int, int] = {}
    walk: list[int] = []
    while task not in seen:
        seen[task] = len(walk)
        walk.append(task)
        task = min(before for before in predecessors[task] if waiting[before])
    cycle = walk[seen[task] :][::-1]  # the walk went upstream; a cycle reads downstream
    first = cycle.index(min(cycle))
    cycle = cycle[first:] + cycle[:first]
    tasks = " -> ".join(names[task] for task in [*cycle, cycle[0]])
    stage_path: list[str] = []
    for task in [*cycle, cycle[0]]:
        stage = stages[bisect_right(starts, task) - 1].name
        if not stage_path or stage_path[-1] != stage:
            stage_path.append(stage)
    if len(stage_path) == 1:  # a stage reading itself: show it as the loop it is
        stage_path.append(stage_path[0])
    return (
        f"pipeline {pipeline!r} has a cycle: {tasks} (stages {' -> '.join(stage_path)}); "
        "a task cannot wait for itself, so remove or change one of these dependencies"
    )
