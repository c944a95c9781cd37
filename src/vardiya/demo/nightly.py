"""Demo section: slot scheduling on the nightly-users example, one day replayed on a virtual clock.

The day is 2026-12-01 in Istanbul. The app is "down" from 03:00 to 04:00, so slot 3's ticks never
fire; the 04:01 tick does its own slot first and then recovers slot 3 from the backlog. About 1 % of
the users fail on the :01 run of their slot, so every :31 compensation run has a little work.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from ..clock import VirtualClock
from ..examples.nightly_users import JOB, ZONE, build_app
from ..slots.balance import balance
from ..slots.chart import write_chart
from ..slots.report import ledger_report
from ..slots.runner import TICK_CAPTION, TICK_COLUMNS, TickReport, planned_ticks, replay
from ..store import Store

__all__ = ["nightly_section"]

DAY = datetime(2026, 12, 1, tzinfo=ZoneInfo(ZONE))
DOWN = (DAY.replace(hour=3), DAY.replace(hour=4))


def nightly_section(
    *, directory: Path, store: Store, clock: VirtualClock, console: Console
) -> tuple[str, dict[str, Any]]:
    """Replay a day of the nightly-users job and show what each tick did and how the slots balance."""
    console.print("\n[bold]2. Slot scheduling[/]: 28,742 users, 24 hourly slots, runs at :01 and :31")
    root = directory / "nightly_users"
    out = root / "out"
    # The demo skips fsync: a killed process still never leaves a partial file (the rename is
    # atomic); the default, durable=True, also survives a power loss.
    app = build_app(root / "users.db", out, durable=False)
    job = app.get_slot_job(JOB)
    ids = list(job.source.all_ids())
    report = balance(ids, job.scheme)
    console.print(
        f"balance before running: {report.total} users, {report.min}..{report.max} a slot "
        f"(mean {report.mean:.2f}, spread {report.spread}); {report.recommendation}"
    )

    start, end = DAY, DAY + timedelta(days=1)
    clock.set(start)
    total = sum(1 for tick in planned_ticks(job, start, end) if not DOWN[0] <= tick < DOWN[1])
    with Progress(
        TextColumn("replaying {task.description}"), BarColumn(), MofNCompleteColumn(), console=console, transient=True
    ) as progress:
        task = progress.add_task(f"{start:%Y-%m-%d} ({ZONE})", total=total)
        replayed = replay(store, job, start, end, clock=clock, skip=[DOWN], on_tick=lambda _: progress.advance(task))

    table = Table(title=f"{JOB}: ticks of {start:%Y-%m-%d} ({ZONE}; down {DOWN[0]:%H:%M}-{DOWN[1]:%H:%M})")
    for column in ("planned", *TICK_COLUMNS):
        table.add_column(column, justify="right")
    for tick in _interesting(replayed.ticks):
        table.add_row(
            f"{tick.planned_at.astimezone(DAY.tzinfo):%H:%M}", str(tick.slot), str(tick.already_done), str(tick.started),
            str(tick.backlog), str(tick.held), str(tick.done), str(tick.failed), tick.cut.value if tick.cut else "",
        )
    table.caption = TICK_CAPTION
    console.print(table)
    recovery = next(tick for tick in replayed.ticks if tick.backlog)
    files = sum(1 for _ in out.rglob("*.json"))
    counts = store.ledger.counts(JOB, replayed.ticks[0].period)
    console.print(
        f"{len(replayed.ticks)} ticks fired, {replayed.done} records done, {replayed.failed} failed "
        f"and retried; the {recovery.planned_at.astimezone(DAY.tzinfo):%H:%M} tick took {recovery.backlog} records of slot "
        f"{recovery.backlog_slots[0][1]} from the backlog. Ledger: {counts[next(iter(counts))]} done; "
        f"{files} files under {out}"
    )
    ledger = ledger_report(store, job, replayed.ticks[0].period)
    chart = write_chart(root / "slots.svg", ledger)
    balance_table = Table(title=f"balance from the ledger, {ledger.period}: per-slot load")
    for column in ("slot", "records", "bytes", "p50 ms", "p95 ms", "max ms", "busy s", "overrun"):
        balance_table.add_column(column, justify="right")
    for load in ledger.slots:
        balance_table.add_row(
            str(load.slot), str(load.count), f"{load.bytes:,}", f"{load.p50_ms:.2f}", f"{load.p95_ms:.2f}",
            f"{load.max_ms:.2f}", f"{load.total_ms / 1000:.2f}", "yes" if load.overrun else "",
        )
    console.print(balance_table)
    for warning in ledger.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    console.print(f"chart of counts and p95 per slot: {chart}")
    figures = {
        "ticks": len(replayed.ticks),
        "done": replayed.done,
        "failed": replayed.failed,
        "still_failed": replayed.still_failed,
        "recovered_at": recovery.planned_at.isoformat(),
        "recovered": recovery.backlog,
        "recovered_slots": [slot for _, slot in recovery.backlog_slots],
        "files": files,
        "balance": report.to_json(),
        "ledger_total": ledger.total,
        "ledger_failed": ledger.failed,
        "chart": str(chart),
    }
    return "slots", figures


def _interesting(ticks: list[TickReport]) -> Iterator[TickReport]:
    """The first hours, the recovery and the last tick: the whole day would be 46 rows."""
    for index, tick in enumerate(ticks):
        if index < 4 or tick.backlog or index == len(ticks) - 1:
            yield tick
