"""Demo section: the meter-readings pipeline, a drilled failure, its blast radius, the grid, a resume.

The impact table comes before anything fails: the graph already knows what a failure of
``clean@2026-06`` would block. The drill then fails it for real, the grid shows failed and blocked
cells, and ``resume`` runs exactly the failed and blocked tasks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..clock import VirtualClock
from ..examples.meter_pipeline import pipeline, pipeline_missing_edge
from ..pipeline import build_graph, impact_all, resume, run_pipeline, status, task_impact
from ..pipeline.grid import grid_svg, write_grid
from ..store import Store

__all__ = ["pipelines_section"]

DRILL = "clean@2026-06"


def pipelines_section(
    *, directory: Path, store: Store, clock: VirtualClock, console: Console
) -> tuple[str, dict[str, Any]]:
    """Run the meter pipeline with a drilled failure, show the impact and the grid, then resume."""
    console.print("\n[bold]3. Partitioned pipelines[/]: meter readings, 4 stages x 12 months")
    root = directory / "meter_pipeline"
    graph = build_graph(pipeline)
    variant = graph.variant_without_cross_partition_edges()
    impact, without_edge = task_impact(graph, DRILL), task_impact(variant, DRILL)
    table = Table(title=f"before anything fails: what a failure of {DRILL} would block")
    for column in ("graph", "tasks", "edges", "blast radius", "rerun set", "all: total"):
        table.add_column(column, justify="right")
    table.add_row("declared", str(len(graph.order)), str(graph.edge_count), str(impact.blast_radius),
                  str(len(impact.rerun)), str(impact_all(graph).total))
    table.add_row("no cross-month", str(len(variant.order)), str(variant.edge_count),
                  str(without_edge.blast_radius), str(len(without_edge.rerun)), str(impact_all(variant).total))
    console.print(table)

    first = run_pipeline(store, pipeline, root=root, inject_failure=[DRILL], clock=clock)
    console.print(
        f"run {first.run_id} with the drill: {len(first.succeeded)} succeeded, failed {', '.join(first.failed)}, "
        f"blocked {', '.join(first.blocked)}"
    )
    current = status(store, pipeline)
    grid = write_grid(root / "grid.svg", grid_svg(graph, current.tasks, title="meter pipeline after the drill"))
    console.print(f"the stage x month grid, coloured by state: {grid}")
    second = resume(store, pipeline, clock=clock)
    final = status(store, pipeline)
    console.print(
        f"resume ran exactly {len(second.ran)} tasks ({', '.join(second.ran)}); "
        f"all {len(final.tasks)} tasks green: {final.green}"
    )
    strict = run_pipeline(store, pipeline_missing_edge, root=root / "missing_edge", strict=True, clock=clock)
    if strict.errors:
        task, message = next(iter(strict.errors.items()))
        console.print(f"[yellow]lineage check[/] (the cross-month edge left out): {escape(task)}: {escape(message)}")
    figures = {
        "tasks": len(graph.order),
        "edges": graph.edge_count,
        "blast_radius": impact.blast_radius,
        "failed": list(first.failed),
        "blocked": list(first.blocked),
        "resumed": list(second.ran),
        "green": final.green,
        "undeclared_failures": len(strict.failed),
        "grid": str(grid),
    }
    return "pipelines", figures
