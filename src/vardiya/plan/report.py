"""The planner's figures for people: Rich tables and the sentences that say what they show.

Shared by ``vardiya plan`` and the demo; ``--json`` prints the values themselves instead.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console

from ..invoke.handlers import Model
from ..output import FitTable
from .compare import Comparison
from .dedup import DedupPlan
from .profile import Profile
from .replay import PlanRow
from .sweep import Sweep
from .workload import Workload

__all__ = ["label", "print_comparison", "print_dedup", "print_row", "print_sweep", "table"]


def table(title: str, caption: str | None = None) -> FitTable:
    """A plan table: light rules, so that a sweep's columns fit 80 characters (else key: value lines)."""
    return FitTable(title=title, caption=caption, box=box.SIMPLE, pad_edge=False, padding=(0, 1, 0, 0))


def print_row(console: Console, row: PlanRow, workload: Workload, profile: Profile) -> None:
    """One replay's figures, and whether its calls fit the time limit."""
    figures = table(f"{label(row)}: {len(workload):,} records")
    figures.add_column("metric")
    figures.add_column("value", justify="right")
    for key, value in row.to_json().items():
        if key not in ("model", "batch_size", "policy"):
            figures.add_row(key, _value(value))
    console.print(figures)
    if not row.fits_limit:
        console.print(
            f"[red]does not fit[/]: a full call takes {row.batch_ms / 1000:,.2f} s, the limit is {profile.time_limit_s:g} s "
            f"({row.timed_out:,} call(s) timed out)"
        )


def label(row: PlanRow) -> str:
    """``sync``, ``async``, or ``stream 100 retry_batch``."""
    if row.model is Model.STREAM:
        return f"stream {row.batch_size} {row.policy.value if row.policy else ''}".strip()
    return row.model.value


def print_comparison(console: Console, result: Comparison, workload: Workload) -> None:
    """The comparison's two tables and what they say (shared with the demo)."""
    models = table(f"the models: {len(workload):,} records, stream batches of {result.batch_size}")
    for column in ("model", "caller wait", "completion", "p99", "calls", "processed", "dead", "cost"):
        models.add_column(column, justify="left" if column == "model" else "right", no_wrap=True)
    for row in result.models:
        m = row.metrics
        models.add_row(
            row.model.value, _seconds(m.caller_wait_ms or 0.0), _seconds(m.completion_mean_ms),
            _seconds(m.completion_p99_ms), f"{m.calls:,}", f"{m.processed:,}", f"{m.dead_letter:,}", f"{m.cost:,.2f}",
        )
    console.print(models)
    sync, async_, stream = (row.metrics for row in result.models)
    console.print(
        f"latency moves, it does not vanish: the caller waits {_seconds(sync.caller_wait_ms or 0)} (sync) against "
        f"{_seconds(stream.caller_wait_ms or 0)}, while completion p99 grows from {_seconds(sync.completion_p99_ms)} "
        f"to {_seconds(async_.completion_p99_ms)} (async) and {_seconds(stream.completion_p99_ms)} (stream). "
        f"Sync: the caller saw {sync.caller_errors:,} error(s); async and stream: nobody did, "
        f"{async_.dead_letter:,} and {stream.dead_letter:,} record(s) wait in the dead-letter store"
    )
    policies = table(f"the stream's failure policies, batches of {result.batch_size}")
    for column in ("policy", "calls", "processed", "dead", "co-failed", "p99", "busy h", "cost"):
        policies.add_column(column, justify="left" if column == "policy" else "right", no_wrap=True)
    for row in result.policies:
        m = row.metrics
        policies.add_row(
            row.policy.value if row.policy else "", f"{m.calls:,}", f"{m.processed:,}", f"{m.dead_letter:,}",
            f"{m.co_failed:,}", _seconds(m.completion_p99_ms), f"{m.busy_ms / 3_600_000:,.1f}", f"{m.cost:,.2f}",
        )
    console.print(policies)


def print_sweep(console: Console, result: Sweep, workload: Workload) -> None:
    """The sweep's table and its picks (shared with the demo)."""
    rows = table(
        f"batch sizes under {result.policy.value}: {len(workload):,} records",
        caption=f"p99: arrival to final outcome; too big: cannot fit the {result.time_limit_s:g} s limit",
    )
    for column in ("size", "calls", "processed", "dead", "co-failed", "p99 s", "busy h", "cost", ""):
        rows.add_column(column, justify="left" if not column else "right", no_wrap=True)
    for row in result.rows:
        m = row.metrics
        notes = [name for name, size in (("cheapest", result.cheapest), ("fastest", result.fastest)) if size == row.batch_size]
        if not row.fits_limit:
            notes.append("[red]too big[/]")
        rows.add_row(
            f"{row.batch_size:,}", f"{m.calls:,}", f"{m.processed:,}", f"{m.dead_letter:,}", f"{m.co_failed:,}",
            f"{m.completion_p99_ms / 1000:,.0f}", f"{m.busy_ms / 3_600_000:,.1f}", f"{m.cost:,.2f}", ", ".join(notes),
        )
    console.print(rows)
    if result.cheapest is None or result.fastest is None:
        console.print("[red]no batch size fits the time limit[/]")
        return
    cheapest, fastest = result.row(result.cheapest), result.row(result.fastest)
    console.print(
        f"cheapest: batch size {result.cheapest} (cost {cheapest.cost:,.2f}); fastest: batch size {result.fastest} "
        f"(busy {_hours(fastest.busy_ms)})"
        + ("; the cheapest is not the fastest" if result.cheapest != result.fastest else "")
    )
    unfit = [f"{row.batch_size} ({row.batch_ms / 1000:,.2f} s a call)" for row in result.rows if not row.fits_limit]
    if unfit:
        console.print(f"cannot fit the {result.time_limit_s:g} s limit, never recommended: {', '.join(unfit)}")


def print_dedup(console: Console, result: DedupPlan) -> None:
    """The dedup plan as a table and a sentence."""
    rows = table(
        f"dedup: {result.window_s / 3600:g} h keys, redrive after {result.redrive_after_s / 3600:g} h "
        f"(stream {result.batch_size}, {result.policy.value})"
    )
    rows.add_column("figure")
    rows.add_column("value", justify="right")
    for key, value in result.to_json().items():
        if key not in ("window_s", "redrive_after_s", "batch_size", "policy"):
            rows.add_row(key, _value(value))
    console.print(rows)
    console.print(
        f"the redrive processes {result.reprocessed_without_retention:,} record(s) a second time when keys expire at the "
        f"window, {result.reprocessed_with_retention:,} with vardiya's retention; dedup costs {result.dedup_cost:,.2f} "
        f"against {result.prevented_cost:,.2f} of processing it prevents"
    )


def _seconds(ms: float) -> str:
    return f"{ms:,.0f} ms" if ms < 1000 else f"{ms / 1000:,.1f} s"


def _hours(ms: float) -> str:
    return f"{ms / 3_600_000:,.1f} h"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    return f"{value:,}" if isinstance(value, int) else str(value)


