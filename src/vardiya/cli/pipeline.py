"""``vardiya pipeline``: the task graph of a partitioned pipeline and the impact of a failure.

PIPE is ``MODULE_OR_FILE:ATTR`` naming a ``vardiya.pipeline.Pipeline``. ``graph`` and ``impact`` read the
declarations only: they build the pure graph and never open the store. Every subcommand prints Rich
tables for people, or with ``--json`` exactly one JSON document whose field names are the contract of
cli.md. Bad input (a PIPE that does not import, a cycle, an unknown stage or task) is a
``VardiyaError`` that the CLI main turns into one line on stderr and exit code 2.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from ..app import load_object
from ..errors import AppNotFound
from ..output import FitTable
from ..pipeline import AllImpact, Impact, Pipeline, Stage, TaskGraph, build_graph, impact_all, task_impact
from ..pipeline.grid import grid_svg, write_grid
from ..slots.chart import check_chart_path
from .commands import Group
from .context import Settings, emit_json, global_options, pass_settings

__all__ = ["pipeline"]

F = TypeVar("F", bound=Callable[..., Any])

_LARGEST = 10  # tasks shown by impact --all
_BLOCKED_SHOWN = 24  # blocked tasks listed by impact --task; --json lists them all
_VARIANT = "graph without cross-partition edges"


# -- shared options and loading -------------------------------------------------------------------


def _json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(command)


def _pipe_argument(command: F) -> F:
    return click.argument("spec", metavar="PIPE")(command)


def _load_pipeline(spec: str) -> Pipeline:
    """The ``Pipeline`` PIPE names; anything else is one ``AppNotFound`` line."""
    target = load_object(spec, what="pipeline", option="PIPE")
    if not isinstance(target, Pipeline):
        raise AppNotFound(
            f"PIPE {spec!r} is of type {type(target).__name__}, not a vardiya Pipeline; "
            "point PIPE at a Pipeline object, e.g. pipelines.py:meters"
        )
    return target


def _load_graph(spec: str, *, same_partition_only: bool = False) -> TaskGraph:
    """The validated task graph of PIPE, or its variant without the cross-partition edges."""
    graph = build_graph(_load_pipeline(spec))
    return graph.variant_without_cross_partition_edges() if same_partition_only else graph


def _reads(stage: Stage) -> str:
    return "; ".join(
        f"{upstream} {', '.join(map(str, mappings))}" for upstream, mappings in stage.upstreams.items()
    )


# -- the group ------------------------------------------------------------------------------------


@click.group(cls=Group)
@global_options
def pipeline() -> None:
    """Partitioned pipelines: the task graph, and what a failure would block before anything fails."""


# -- the graph, before anything runs --------------------------------------------------------------


@pipeline.command("graph")
@global_options
@_pipe_argument
@click.option(
    "--plot", "plot", default=None, metavar="FILE", help="Also write the stage x partition grid (.svg, or .png)."
)
@_json_option
@pass_settings
def graph_command(settings: Settings, spec: str, plot: str | None, as_json: bool) -> None:
    """The tasks of PIPE (stage@partition), its edges and a topological order; validates the declarations."""
    if plot is not None:
        check_chart_path(plot)
    graph = _load_graph(spec)
    written = None
    if plot is not None:
        written = write_grid(plot, grid_svg(graph, title=f"pipeline {graph.pipeline}: stages x partitions"))
    if as_json:
        document = graph.to_json()
        if written is not None:
            document["plot"] = str(written)
        emit_json(document)
        return
    _print_graph(settings.console, graph, written)


def _print_graph(console: Console, graph: TaskGraph, written: Path | None) -> None:
    table = FitTable(title=f"pipeline {graph.pipeline}")
    table.add_column("stage")
    table.add_column("partitions", wrap=True)
    table.add_column("tasks", justify="right")
    table.add_column("reads", wrap=True)
    for number, stage in enumerate(graph.stages):
        count = graph.starts[number + 1] - graph.starts[number]
        table.add_row(stage.name, stage.partitions.label, f"{count:,}", _reads(stage) or "-")
    console.print(table)
    keys = graph.partition_keys
    crossing = sum(
        keys[before] != keys[task] for task, upstream in enumerate(graph.predecessors) for before in upstream
    )
    console.print(
        f"{len(graph):,} tasks, {graph.edge_count:,} edges ({crossing:,} across partitions); "
        "--json prints a topological order"
    )
    if written is not None:
        console.print(f"grid written to {written}")


@pipeline.command("impact")
@global_options
@_pipe_argument
@click.option("--task", "task", default=None, metavar="T", help="The task whose failure to weigh (stage@partition).")
@click.option("--all", "every_task", is_flag=True, help="The blast radius of every task, and the total.")
@click.option(
    "--same-partition-only", is_flag=True,
    help="Compute on the variant graph without cross-partition edges, to see what a missing edge hides.",
)
@_json_option
@pass_settings
def impact_command(
    settings: Settings, spec: str, task: str | None, every_task: bool, same_partition_only: bool, as_json: bool
) -> None:
    """What cannot run if T fails (its blast radius) and what rerunning T runs; or every task's with --all."""
    if task is not None and every_task:
        raise click.UsageError("--task and --all exclude each other; give one of them", ctx=click.get_current_context())
    if task is None and not every_task:
        raise click.UsageError(
            "give --task T for one task (e.g. --task clean@2026-06) or --all for every task",
            ctx=click.get_current_context(),
        )
    graph = _load_graph(spec, same_partition_only=same_partition_only)
    variant = f" ({_VARIANT})" if same_partition_only else ""
    if task is not None:
        impact = task_impact(graph, task)
        if as_json:
            emit_json(impact.to_json())
        else:
            _print_impact(settings.console, impact, variant)
        return
    every = impact_all(graph)
    if as_json:
        emit_json(every.to_json())
    else:
        _print_impact_all(settings.console, graph.pipeline, every, variant)


def _print_impact(console: Console, impact: Impact, variant: str) -> None:
    table = FitTable(title=f"if {impact.task} fails{variant}")
    table.add_column("task")
    table.add_column("blast radius", justify="right")
    table.add_column("blocked tasks", wrap=True)
    shown = ", ".join(impact.blocked[:_BLOCKED_SHOWN]) or "none"
    if impact.blast_radius > _BLOCKED_SHOWN:
        shown += f", ... and {impact.blast_radius - _BLOCKED_SHOWN:,} more (--json lists them all)"
    table.add_row(impact.task, f"{impact.blast_radius:,}", shown)
    console.print(table)
    console.print(f"rerun {impact.task} runs {len(impact.rerun):,} tasks: it and the {impact.blast_radius:,} it blocks")


def _print_impact_all(console: Console, pipeline_name: str, every: AllImpact, variant: str) -> None:
    ranked = sorted(every.tasks.items(), key=lambda item: -item[1])  # stable: ties keep the run order
    largest = ranked[:_LARGEST]
    table = FitTable(title=f"largest blast radii of pipeline {pipeline_name}{variant}")
    table.add_column("task")
    table.add_column("blast radius", justify="right")
    for name, radius in largest:
        table.add_row(name, f"{radius:,}")
    table.add_section()
    table.add_row(f"total over {len(every.tasks):,} tasks", f"{every.total:,}")
    console.print(table)
    # A cut through a tie hides tasks as large as the last one shown; say how many.
    tied = sum(radius == largest[-1][1] for _, radius in ranked[_LARGEST:]) if largest else 0
    if tied:
        console.print(f"{tied:,} more with blast radius {largest[-1][1]:,}; --json lists every task")
