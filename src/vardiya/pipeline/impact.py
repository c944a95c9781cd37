"""Impact before anything fails: what a task's failure blocks, and what a restart must run. Pure.

``blast_radius(graph, T)`` is the number of T's descendants: the tasks that cannot run if T fails.
``rerun_set(graph, T)`` is T and those descendants, the only set a ``rerun T`` needs to run.
``impact_all(graph)`` gives every task's blast radius and their total, and
``restart_after_failure`` the "with checkpoints versus without" figure: without checkpoints (or
without the graph) the only safe restart is every task.

Counting every task's descendants exactly
    Descendant sets overlap, so counts cannot be summed from children's counts; exact counting on a
    DAG is not linear in general. ``impact_all`` keeps each task's descendants as a bitset (a Python
    int) and ORs its children's sets in reverse topological order, then takes ``int.bit_count()``:
    O(V + E * W / w) for bitsets W bits wide, w the machine word; W <= V, so O(V * E / w) in the worst
    case (a fan-in report at the end makes every set about V wide).

    Two choices keep W small for the graphs pipelines have (same / offset / window between equally
    partitioned stages):

    - Bits count *relative* to the task (bit k: the task k + 1 positions later), so a set costs the
      distance to its farthest descendant, not its absolute position.
    - Positions come from a topological order taken partition by partition (ties by partition
      position, then stage), so a task's descendants sit right after it: with S stages reading
      each other at most k partitions back (and no stage reading itself), every set is O(S * S * k)
      bits wide whatever the number of partitions, and the whole count is near-linear.

    A set is dropped once every parent has read it, so memory holds only the sets of the frontier.
    ``benchmarks/bench_pipeline_graph.py`` measures both shapes: a 20-stage chain grows like the
    graph build itself (about tasks^1.2 from 10,000 to 100,000 tasks, heaps and memory traffic),
    while a fan-in report over the last stage shows the wide-set worst case (about tasks^1.7).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInput
from .graph import TaskGraph

__all__ = [
    "AllImpact",
    "Impact",
    "Restart",
    "blast_radius",
    "descendant_counts",
    "descendants",
    "impact_all",
    "rerun_set",
    "restart_after_failure",
    "task_impact",
]


@dataclass(frozen=True, kw_only=True)
class Impact:
    """What cannot run if ``task`` fails (``blocked``, in topological order) and what a rerun runs."""

    task: str
    blocked: tuple[str, ...]

    @property
    def blast_radius(self) -> int:
        """How many tasks the failure blocks."""
        return len(self.blocked)

    @property
    def rerun(self) -> tuple[str, ...]:
        """The task and everything it blocks: what ``rerun`` runs, nothing else."""
        return (self.task, *self.blocked)

    def to_json(self) -> dict[str, Any]:
        """``{task, blast_radius, blocked, rerun_count, rerun}`` as ``pipeline impact --json`` prints it."""
        return {
            "task": self.task,
            "blast_radius": self.blast_radius,
            "blocked": list(self.blocked),
            "rerun_count": len(self.rerun),
            "rerun": list(self.rerun),
        }


@dataclass(frozen=True, kw_only=True)
class AllImpact:
    """Every task's blast radius, in topological order, and the total over all tasks."""

    tasks: dict[str, int]
    total: int

    def to_json(self) -> dict[str, Any]:
        """``{tasks: {T: blast_radius}, total}`` as ``pipeline impact --all --json`` prints it."""
        return {"tasks": dict(self.tasks), "total": self.total}


@dataclass(frozen=True, kw_only=True)
class Restart:
    """What a restart after ``failed`` fails runs with checkpoints, against every task without them.

    ``blocked`` are the failed task's descendants that are not done; ``never_run`` the other tasks
    that are not done (none after a run that kept independent tasks going).
    """

    failed: str
    blocked: tuple[str, ...]
    never_run: tuple[str, ...]
    total: int

    @property
    def with_checkpoints(self) -> int:
        """How many tasks a checkpointed restart runs: the failed one and what is not done."""
        return 1 + len(self.blocked) + len(self.never_run)

    @property
    def without_checkpoints(self) -> int:
        """How many a restart without checkpoints runs: all of them, the only safe choice by hand."""
        return self.total

    def to_json(self) -> dict[str, Any]:
        """``{failed, blocked, never_run, with_checkpoints, without_checkpoints, saved}``."""
        return {
            "failed": self.failed,
            "blocked": list(self.blocked),
            "never_run": list(self.never_run),
            "with_checkpoints": self.with_checkpoints,
            "without_checkpoints": self.without_checkpoints,
            "saved": self.without_checkpoints - self.with_checkpoints,
        }


def _descendant_ids(graph: TaskGraph, task: int) -> list[int]:
    """The descendants of one task id, in the graph's topological order."""
    successors = graph.successors
    seen = {task}
    stack = [task]
    while stack:
        for after in successors[stack.pop()]:
            if after not in seen:
                seen.add(after)
                stack.append(after)
    seen.discard(task)
    positions = graph.positions
    return sorted(seen, key=positions.__getitem__)


def descendants(graph: TaskGraph, task: str) -> list[str]:
    """The tasks that cannot run if ``task`` fails, in topological order."""
    names = graph.names
    return [names[after] for after in _descendant_ids(graph, graph.task_id(task))]


def blast_radius(graph: TaskGraph, task: str) -> int:
    """How many tasks cannot run if ``task`` fails."""
    return len(_descendant_ids(graph, graph.task_id(task)))


def rerun_set(graph: TaskGraph, task: str) -> list[str]:
    """``task`` and its descendants: what rerunning ``task`` must run, in topological order."""
    return [task, *descendants(graph, task)]


def task_impact(graph: TaskGraph, task: str) -> Impact:
    """The blast radius and rerun set of one task, as one result."""
    return Impact(task=task, blocked=tuple(descendants(graph, task)))


def _locality_order(graph: TaskGraph) -> list[int]:
    """A topological order taken partition by partition, so that descendants follow their ancestor closely.

    Kahn's algorithm with the ready heap keyed by (partition position, stage): the key
    ``position * stages + stage`` is unique per task, so the heap holds plain ints.
    """
    stage_count, starts = len(graph.stages), graph.starts
    key_of = [0] * len(graph.names)
    for stage in range(stage_count):
        for position in range(starts[stage + 1] - starts[stage]):
            key_of[starts[stage] + position] = position * stage_count + stage
    waiting = [len(upstream) for upstream in graph.predecessors]
    ready = [key_of[task] for task, count in enumerate(waiting) if not count]
    heapq.heapify(ready)
    successors, order = graph.successors, []
    while ready:
        position, stage = divmod(heapq.heappop(ready), stage_count)
        task = starts[stage] + position
        order.append(task)
        for after in successors[task]:
            waiting[after] -= 1
            if not waiting[after]:
                heapq.heappush(ready, key_of[after])
    return order


def descendant_counts(graph: TaskGraph) -> list[int]:
    """The exact number of descendants of every task, by task id (see the module docstring)."""
    order = _locality_order(graph)
    position = [0] * len(order)
    for place, task in enumerate(order):
        position[task] = place
    successors, predecessors = graph.successors, graph.predecessors
    unread = [len(upstream) for upstream in predecessors]  # parents that have yet to read a set
    reach = [0] * len(order)  # bit k of reach[t]: the task k + 1 places after t is a descendant of t
    counts = [0] * len(order)
    for task in reversed(order):
        here, bits = position[task], 0
        for after in successors[task]:
            bits |= ((reach[after] << 1) | 1) << (position[after] - here - 1)
            unread[after] -= 1
            if not unread[after]:
                reach[after] = 0  # every parent has it now: free the memory
        counts[task] = bits.bit_count()
        if unread[task]:
            reach[task] = bits
    return counts


def impact_all(graph: TaskGraph) -> AllImpact:
    """The blast radius of every task (in topological order) and the total over all tasks."""
    counts, names = descendant_counts(graph), graph.names
    tasks = {names[task]: counts[task] for task in graph.order_ids}
    return AllImpact(tasks=tasks, total=sum(counts))


def restart_after_failure(graph: TaskGraph, failed: str, done: Iterable[str] | None = None) -> Restart:
    """What a restart runs after ``failed`` failed, with checkpoints and without.

    ``done`` are the tasks whose success is checkpointed. Left out, it is what a run that keeps
    independent tasks going leaves behind: every task outside ``failed``'s rerun set. A restart with
    checkpoints runs every task that is not done; without them, every task.
    """
    failed_id = graph.task_id(failed)
    blocked_ids = _descendant_ids(graph, failed_id)
    if done is None:
        done_ids = set(range(len(graph.names))) - {failed_id, *blocked_ids}
    else:
        done_ids = {graph.task_id(task) for task in done}
        if failed_id in done_ids:
            raise InvalidInput(f"task {failed!r} is given as both failed and done; a failed task is not done")
    rerun = {failed_id, *blocked_ids}
    not_done = [task for task in graph.order_ids if task not in done_ids and task not in rerun]
    names = graph.names
    return Restart(
        failed=failed,
        blocked=tuple(names[task] for task in blocked_ids if task not in done_ids),
        never_run=tuple(names[task] for task in not_done),
        total=len(names),
    )
