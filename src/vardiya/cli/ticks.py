"""``vardiya tick`` and ``vardiya replay``: run a slot job's planned ticks by hand or over a time range."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import click

from ..app import load_app
from ..clock import VirtualClock
from ..errors import InvalidInput
from ..output import FitTable, progress
from ..slots.job import SlotJob
from ..slots.runner import TICK_CAPTION, TICK_COLUMNS, Cut, ReplayReport, TickReport, planned_ticks, replay, run_tick
from ..store import Store
from ..times import parse_time
from .context import Settings, StoreUse, emit_json, global_options, pass_settings
from .errors import print_failures

__all__ = ["replay_command", "tick"]


def _tick_table(ticks: list[TickReport], zone: str) -> FitTable:
    table = FitTable(title=f"ticks (times in {zone})")
    table.add_column("planned", no_wrap=True)
    for column in TICK_COLUMNS:
        table.add_column(column, justify="right")
    table.caption = TICK_CAPTION
    place = ZoneInfo(zone)
    for tick in ticks:
        table.add_row(
            f"{tick.planned_at.astimezone(place):%Y-%m-%d %H:%M}", str(tick.slot), str(tick.already_done),
            str(tick.started), str(tick.backlog), str(tick.held), str(tick.done), str(tick.failed),
            tick.cut.value if tick.cut is not None else "",
        )
    return table


@click.command()
@global_options
@click.argument("job_name", metavar="JOB")
@click.option("--at", "at", required=True, metavar="TIME", help="The tick's planned time (ISO 8601; naive = the job's zone).")
@click.option(
    "--outside-window", is_flag=True,
    help="Run even after the slot's window has ended (a deliberate run of a past slot); only the deadline stops it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_settings
def tick(settings: Settings, job_name: str, at: str, outside_window: bool, as_json: bool) -> int:
    """Run the tick of JOB planned for TIME: its slot, then the backlog. Exit 1 when records failed.

    No record is started after the slot's window (plus the job's deadline_grace) has ended, so a tick
    run after it does nothing and says so (cut: window) unless --outside-window is given.
    """
    job = load_app(settings.app).get_slot_job(job_name)
    planned = parse_time(at, tz=job.scheme.tz, what="--at")
    with settings.open_store(StoreUse.CREATE) as store:
        report = run_tick(store, job, planned, within_window=not outside_window)
    if as_json:
        emit_json(report.to_json())
    else:
        settings.console.print(_tick_table([report], job.scheme.tz))
        if report.cut is Cut.WINDOW and report.stop_at is not None:
            place = ZoneInfo(job.scheme.tz)
            settings.console.print(
                f"the window of slot {report.slot} closed at {report.stop_at.astimezone(place):%Y-%m-%d %H:%M:%S}: "
                "the rest is left to the next run and the backlog (--outside-window runs a past slot by hand)"
            )
        print_failures(settings.console, report.failures)
    return 1 if report.failed else 0


@click.command("replay")
@global_options
@click.argument("job_name", metavar="JOB")
@click.option("--from", "start", required=True, metavar="TIME", help="First planned time to fire (inclusive).")
@click.option("--to", "end", required=True, metavar="TIME", help="End of the range (exclusive).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_settings
def replay_command(settings: Settings, job_name: str, start: str, end: str, as_json: bool) -> int:
    """Fire every tick of JOB planned in [--from, --to), in order, on a virtual clock; handlers run for real."""
    job = load_app(settings.app).get_slot_job(job_name)
    first = parse_time(start, tz=job.scheme.tz, what="--from")
    last = parse_time(end, tz=job.scheme.tz, what="--to")
    if last <= first:
        raise InvalidInput(f"--to {end} is not after --from {start}; give a range that moves forward")
    clock = VirtualClock(first)
    with settings.open_store(StoreUse.CREATE, clock=clock) as store:
        if as_json:
            report = replay(store, job, first, last, clock=clock)
        else:
            report = _replay_with_progress(settings, store, job, first, last, clock)
    if as_json:
        emit_json(report.to_json())
    else:
        settings.console.print(_tick_table(report.ticks, job.scheme.tz))
        settings.console.print(f"done {report.done}, failed {report.failed}, ticks {len(report.ticks)}")
        print_failures(settings.console, report.failures())
    return 1 if report.still_failed else 0


def _replay_with_progress(
    settings: Settings, store: Store, job: SlotJob, first: datetime, last: datetime, clock: VirtualClock
) -> ReplayReport:
    """The replay, with a progress bar of its ticks on a terminal (nothing when piped)."""
    total = sum(1 for _ in planned_ticks(job, first, last))
    with progress(settings.console, "replay", total) as advance:

        def tell(tick: TickReport) -> None:
            advance(1, f"{job.name} {tick.planned_at.astimezone(ZoneInfo(job.scheme.tz)):%Y-%m-%d %H:%M}")

        return replay(store, job, first, last, clock=clock, on_tick=tell)
