"""Which tasks a pipeline run takes: a partition range, the upstream a selection needs, what is done.

Pure: a run's selection is decided on the task graph and the set of tasks already materialized, before
anything is started, so the refusals (a range that selects nothing, an upstream neither materialized
nor selected) write nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import InvalidInput
from .graph import TaskGraph
from .partitions import Unpartitioned

__all__ = ["TaskPlan", "in_range", "partition_range", "plan_tasks"]

_SHOWN = 5  # how many tasks a refusal names before it says how many more


def partition_range(value: tuple[str, str] | str | None) -> tuple[str, str] | None:
    """``("2026-03", "2026-05")``, ``"2026-03..2026-05"`` or ``"2026-03"`` as (first, last)."""
    if value is None:
        return None
    if isinstance(value, str):
        first, separator, last = value.partition("..")
        return (first, last) if separator else (value, value)
    first, last = value
    return str(first), str(last)


def in_range(graph: TaskGraph, first: str, last: str) -> set[int]:
    """The tasks of every partitioned stage whose set holds both ``first`` and ``last``, from one to the other."""
    chosen: set[int] = set()
    partitioned = [
        (number, stage) for number, stage in enumerate(graph.stages) if not isinstance(stage.partitions, Unpartitioned)
    ]
    if not partitioned:
        raise InvalidInput(
            f"pipeline {graph.pipeline!r} has no partitioned stage, so partition range {first}..{last} "
            "selects nothing; leave the range out"
        )
    for number, stage in partitioned:
        partitions = stage.partitions
        if first in partitions and last in partitions:
            start = graph.starts[number]
            chosen.update(start + partitions.index(key) for key in partitions.range(first, last))
    if not chosen:
        try:
            partitioned[0][1].partitions.range(first, last)
        except InvalidInput as error:
            raise InvalidInput(f"partition range {first}..{last}: {error}") from None
    return chosen


def _missing_message(graph: TaskGraph, missing: Mapping[int, int]) -> str:
    names, positions = graph.names, graph.positions
    ordered = sorted(missing, key=positions.__getitem__)
    shown = ", ".join(f"{names[task]} (needed by {names[missing[task]]})" for task in ordered[:_SHOWN])
    more = f" and {len(ordered) - _SHOWN} more" if len(ordered) > _SHOWN else ""
    return (
        f"the selection needs {shown}{more}, not materialized and not selected; include them in the "
        "selection, or let the plan add them (plan_upstream)"
    )


@dataclass(frozen=True, kw_only=True)
class TaskPlan:
    """What a run does: every task it ``planned``, those it runs (``to_run``) and those already done."""

    planned: frozenset[int]
    to_run: tuple[int, ...]  # topological order
    skipped: tuple[int, ...]


def plan_tasks(graph: TaskGraph, selected: set[int], done: set[int], *, plan_upstream: bool) -> TaskPlan:
    """The plan of ``selected``: an upstream neither ``done`` nor selected is added (``plan_upstream``)
    or refused, naming the first task in order that needs it."""
    planned = set(selected)
    missing: dict[int, int] = {}
    stack = list(selected)
    while stack:
        task = stack.pop()
        for before in graph.predecessors[task]:
            if before in planned or before in done:
                continue
            if plan_upstream:
                planned.add(before)
                stack.append(before)
            elif before not in missing or graph.positions[task] < graph.positions[missing[before]]:
                missing[before] = task  # name the first task in order that needs it, on every run alike
    if missing:
        raise InvalidInput(_missing_message(graph, missing))
    order = [task for task in graph.order_ids if task in planned]
    return TaskPlan(
        planned=frozenset(planned),
        to_run=tuple(task for task in order if task not in done),
        skipped=tuple(task for task in order if task in done),
    )
