"""``vardiya pipeline run|status|resume|rerun|backfill``: running a pipeline against the store.

Exit codes: 0 when every planned task is done, 1 when a task failed (or was blocked or left pending),
2 for bad input (nothing written). Outputs go under ``--root`` (default ``./out``); resume uses the
root of the run it resumes.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape

from ..output import FitTable, progress
from ..pipeline import (
    RunPreview,
    RunResult,
    TaskState,
    backfill,
    build_graph,
    rerun,
    resume,
    resume_preview,
    run_pipeline,
    status,
)
from ..pipeline.grid import grid_svg, write_grid
from ..pipeline.io import UndeclaredReadWarning
from ..slots.chart import check_chart_path
from .commands import renamed_option
from .context import Settings, StoreUse, emit_json, global_options, pass_settings
from .pipeline import _json_option, _load_pipeline, _pipe_argument, pipeline

__all__ = ["backfill_command", "rerun_command", "resume_command", "run_command", "status_command"]

F = TypeVar("F", bound=Callable[..., Any])


def _root_option(command: F) -> F:
    return click.option(
        "--root",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path("out"),
        show_default=True,
        help="Where task outputs are published: ROOT/PIPELINE/STAGE/PARTITION.json.",
    )(command)


def _strict_option(command: F) -> F:
    return click.option(
        "--strict", is_flag=True, help="Fail a task that reads an upstream partition the graph does not declare."
    )(command)


def _report(settings: Settings, result: RunResult, as_json: bool) -> int:
    """Print a run's result; exit 1 unless every planned task is done."""
    if as_json:
        emit_json(result.to_json())
    else:
        _print_result(settings.console, result)
    return 0 if result.ok else 1


def _print_result(console: Console, result: RunResult) -> None:
    table = FitTable(title=f"pipeline {result.pipeline}, run {result.run_id}")
    table.add_column("outcome")
    table.add_column("tasks", justify="right")
    table.add_column("which", wrap=True)
    for label, names in (
        ("succeeded", result.succeeded), ("failed", result.failed), ("blocked", result.blocked),
        ("skipped (done)", result.skipped), ("pending", result.pending),
    ):
        shown = ", ".join(names[:8]) + (f", and {len(names) - 8} more (--json lists them all)" if len(names) > 8 else "")
        table.add_row(label, str(len(names)), shown)
    console.print(table)
    for task, error in result.errors.items():
        console.print(f"[red]{escape(task)}[/]: {escape(error)}")
    said = set(result.errors.values())
    for message in dict.fromkeys(read.to_json()["message"] for read in result.undeclared_reads):
        if not any(message in error for error in said):  # --strict: the failed task's error says it already
            console.print(f"[yellow]undeclared read[/]: {escape(message)}")


def _print_preview(settings: Settings, preview: RunPreview, as_json: bool) -> None:
    if as_json:
        emit_json(preview.to_json())
        return
    console = settings.console
    console.print(
        f"resume of run {preview.resumes} of pipeline {escape(preview.pipeline)} would run "
        f"{len(preview.to_run)} task(s) and skip {len(preview.skipped)} done; nothing was run"
    )
    for name in preview.to_run:
        console.print(f"  {escape(name)}", soft_wrap=True)


def _run_quietly(settings: Settings, label: str, call: Callable[..., RunResult]) -> RunResult:
    """Run with a progress bar on a terminal (none when piped), turning undeclared-read warnings into
    the result's own list (printed by ``_report``). ``call`` takes the engine's ``progress`` callback."""
    with warnings.catch_warnings(), progress(settings.console, label, None) as advance:
        warnings.simplefilter("ignore", UndeclaredReadWarning)

        def tell(finished: int, total: int) -> None:
            advance(0, f"{finished:,} of {total:,} task(s)")

        return call(tell)


@pipeline.command("run")
@global_options
@_pipe_argument
@click.option("--partitions", metavar="A..B", default=None, help="Only the tasks of these partitions (and, if needed, their upstreams).")
@click.option("--task", "tasks", multiple=True, metavar="T", help="Only this task (repeatable).")
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True, help="Tasks running at once.")
@click.option("--fail-fast", is_flag=True, help="Stop launching tasks at the first failure.")
@_strict_option
@click.option("--inject-failure", "inject", multiple=True, metavar="T", help="Make task T fail as a drill (repeatable).")
@click.option("--refuse-upstream", is_flag=True, help="Refuse instead of planning upstream tasks that are not done.")
@_root_option
@_json_option
@pass_settings
def run_command(
    settings: Settings, spec: str, partitions: str | None, tasks: tuple[str, ...], concurrency: int,
    fail_fast: bool, strict: bool, inject: tuple[str, ...], refuse_upstream: bool, root: Path, as_json: bool,
) -> int:
    """Run the tasks of PIPE that are not done, in topological order."""
    definition = _load_pipeline(spec)
    with settings.open_store(StoreUse.CREATE) as store:
        result = _run_quietly(settings, f"run {definition.name}", lambda tell: run_pipeline(
            store, definition, root=root, partitions=partitions, tasks=tasks or None, concurrency=concurrency,
            fail_fast=fail_fast, strict=strict, inject_failure=inject, plan_upstream=not refuse_upstream,
            progress=tell,
        ))
    return _report(settings, result, as_json)


@pipeline.command("resume")
@global_options
@_pipe_argument
@click.option("--dry-run", is_flag=True, help="Print the exact task list the resume would run; run nothing.")
@_json_option
@pass_settings
def resume_command(settings: Settings, spec: str, dry_run: bool, as_json: bool) -> int:
    """Run the failed, blocked and never-run tasks of PIPE's last run (with its selection and root)."""
    definition = _load_pipeline(spec)
    if dry_run:
        with settings.open_store(StoreUse.EXISTING) as store:
            preview = resume_preview(store, definition)
        _print_preview(settings, preview, as_json)
        return 0
    with settings.open_store(StoreUse.CREATE) as store:
        result = _run_quietly(settings, f"resume {definition.name}", lambda _tell: resume(store, definition))
    return _report(settings, result, as_json)


@pipeline.command("rerun")
@global_options
@_pipe_argument
@click.option("--task", "task", required=True, metavar="T", help="The task to invalidate and run again.")
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True, help="Tasks running at once.")
@_strict_option
@_root_option
@_json_option
@pass_settings
def rerun_command(
    settings: Settings, spec: str, task: str, concurrency: int, strict: bool, root: Path, as_json: bool
) -> int:
    """Invalidate task T and every task downstream of it, and run exactly that set."""
    definition = _load_pipeline(spec)
    with settings.open_store(StoreUse.CREATE) as store:
        result = _run_quietly(
            settings, f"rerun {task}",
            lambda _tell: rerun(store, definition, task, root=root, concurrency=concurrency, strict=strict),
        )
    return _report(settings, result, as_json)


@pipeline.command("backfill")
@global_options
@_pipe_argument
@click.option("--from", "first", required=True, metavar="P", help="First partition (inclusive).")
@click.option("--to", "last", required=True, metavar="P", help="Last partition (inclusive).")
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True, help="Tasks running at once.")
@_strict_option
@_root_option
@_json_option
@renamed_option("--max-concurrent", "--concurrency", "concurrency", type=click.IntRange(min=1))
@pass_settings
def backfill_command(
    settings: Settings, spec: str, first: str, last: str, concurrency: int, strict: bool, root: Path, as_json: bool
) -> int:
    """Run the tasks of partitions FROM..TO that are not done, at most --concurrency at once."""
    definition = _load_pipeline(spec)
    with settings.open_store(StoreUse.CREATE) as store:
        result = _run_quietly(settings, f"backfill {definition.name}", lambda tell: backfill(
            store, definition, first, last, root=root, max_concurrent=concurrency, strict=strict, progress=tell,
        ))
    return _report(settings, result, as_json)


@pipeline.command("status")
@global_options
@_pipe_argument
@click.option("--plot", default=None, metavar="FILE", help="Also write the grid coloured by state (.svg, or .png).")
@_json_option
@pass_settings
def status_command(settings: Settings, spec: str, plot: str | None, as_json: bool) -> int:
    """Every task's state and the stale tasks (succeeded before an upstream was run again)."""
    if plot is not None:
        check_chart_path(plot)
    definition = _load_pipeline(spec)
    with settings.open_store(StoreUse.EXISTING) as store:
        current = status(store, definition)
    written = None
    if plot is not None:
        graph = build_graph(definition)
        svg = grid_svg(graph, current.tasks, title=f"pipeline {graph.pipeline}: task states", stale=current.stale)
        written = write_grid(plot, svg)
    if as_json:
        document = current.to_json()
        if written is not None:
            document["plot"] = str(written)
        emit_json(document)
        return 0
    table = FitTable(title=f"pipeline {current.pipeline}: task states")
    table.add_column("state")
    table.add_column("tasks", justify="right")
    for state, count in current.counts.items():
        if count:
            table.add_row(state.value, str(count))
    settings.console.print(table)
    if current.stale:
        settings.console.print(f"[yellow]stale[/]: {escape(', '.join(current.stale))}")
    if written is not None:
        settings.console.print(f"grid written to {written}")
    failed = current.counts[TaskState.FAILED]
    return 1 if failed else 0
