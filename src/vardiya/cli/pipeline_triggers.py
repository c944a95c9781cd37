"""``vardiya pipeline triggers PIPE``: per task, how many times and when it ran, and what started it."""

from __future__ import annotations

import click
from rich.markup import escape

from ..app import load_app
from ..output import FitTable
from ..pipeline.graph import build_graph
from ..pipeline.triggers_report import triggers_report
from .context import Settings, StoreUse, emit_json, global_options, pass_settings
from .pipeline import _load_pipeline, pipeline

__all__ = ["triggers_command"]


@pipeline.command("triggers")
@global_options
@click.argument("spec", metavar="PIPE")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_settings
def triggers_command(settings: Settings, spec: str, as_json: bool) -> int:
    """Per task: its runs, when, and what started each (a trigger, or by hand); empty runs are named.

    PIPE is MODULE_OR_FILE:ATTR of a Pipeline, or the name of a pipeline of the --app.
    """
    if ":" in spec or not settings.app:
        graph = build_graph(_load_pipeline(spec))
    else:
        graph = load_app(settings.app).get_pipeline(spec).graph
    with settings.open_store(StoreUse.EXISTING) as store:
        report = triggers_report(store, graph)
    if as_json:
        emit_json(report.to_json())
        return 0
    table = FitTable(title=f"pipeline {graph.pipeline}: what started each task")
    for column in ("task", "runs", "started by", "last run (UTC)", "empty runs"):
        table.add_column(column, justify="right" if column in ("runs", "empty runs") else "left", wrap=column == "started by")
    for task in report.tasks:
        started = ", ".join(f"{name} ×{count}" for name, count in task.by_trigger.items()) or "-"
        last = task.runs[-1].started_at if task.runs else "never"
        empty = f"[yellow]{task.empty_runs}[/]" if task.empty_runs else "0"
        table.add_row(task.task, str(len(task.runs)), escape(started), last, empty)
    settings.console.print(table)
    if report.empty:
        settings.console.print(
            f"[yellow]empty runs[/] (succeeded with 0 rows, e.g. a schedule that fired before the data): "
            f"{escape(', '.join(report.empty))}"
        )
    return 0
