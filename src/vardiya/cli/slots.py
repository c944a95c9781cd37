"""``vardiya slots``: judge, locate and migrate slot schemes, index a table for them, report on the ledger.

Every subcommand prints Rich tables for people, or with ``--json`` exactly one JSON document whose
field names are the contract of cli.md (extra fields are added, none renamed). Bad input is a
``VardiyaError`` that the CLI main turns into one line on stderr and exit code 2.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any, TypeVar

import click
from rich.console import Console

from ..app import load_app
from ..clock import SystemClock
from ..errors import InvalidInput
from ..output import FitTable, cell
from ..slots.backfill import BackfillReport, backfill
from ..slots.balance import BalanceReport, MigrationPlan, balance, migration_plan, parse_ids
from ..slots.chart import check_chart_path, write_chart
from ..slots.hashing import RecordId
from ..slots.index import SlotIndexReport, add_slot_index
from ..slots.report import LedgerReport, ledger_report
from ..slots.scheme import Assign, Layout, SlotScheme, SlotWindow, parse_scheme
from ..times import parse_duration, parse_time
from .commands import Group, renamed_option
from .context import Settings, StoreUse, emit_json, global_options, pass_settings

__all__ = ["slots"]

F = TypeVar("F", bound=Callable[..., Any])

_GUARANTEE = (
    "the switch takes effect at a period boundary: the period before it runs wholly under the old "
    "scheme, the switch period wholly under the new one, and the ledger is keyed by period, so no "
    "record runs twice and none is missed in the switch period"
)


# -- shared options and readers -------------------------------------------------------------------


def _json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(command)


def _slots_option(command: F) -> F:
    return click.option("--slots", "slot_count", type=int, required=True, metavar="B", help="Number of slots.")(
        command
    )


def _assign_option(command: F) -> F:
    return click.option(
        "--assign",
        type=click.Choice([member.value for member in Assign]),
        default=Assign.MOD.value,
        show_default=True,
        help="mod: id mod B (integer ids); hash: the stable hash H(id) mod B.",
    )(command)


def _window_options(command: F) -> F:
    """``--period-length``, ``--tz``, ``--layout`` and ``--coarse``: how slots become windows of time.

    ``--period`` names a period (a key such as 2026-12-01, as ``slots report`` takes it); the length of
    one is ``--period-length`` (``--period DURATION`` still works here for one release, with a warning).
    """
    for option in reversed(
        (
            click.option(
                "--period-length", "period", default="1d", show_default=True, metavar="DURATION",
                help="How long a period is, e.g. 1d, 1h, 10m.",
            ),
            click.option("--tz", default="UTC", show_default=True, metavar="ZONE", help="IANA zone of the windows."),
            click.option(
                "--layout",
                type=click.Choice([member.value for member in Layout]),
                default=Layout.SEQUENTIAL.value,
                show_default=True,
                help="sequential: slot s is window s; nested: slot s is in coarse window s mod b.",
            ),
            click.option("--coarse", type=int, default=None, metavar="b", help="b of a nested layout (B = k * b)."),
        )
    ):
        command = option(command)
    return command


_old_period = renamed_option("--period", "--period-length", "period", metavar="DURATION")


def _scheme(
    slot_count: int, period: str, tz: str, *, assign: str = Assign.MOD.value,
    layout: str = Layout.SEQUENTIAL.value, coarse: int | None = None,
) -> SlotScheme:
    return SlotScheme(
        slots=slot_count,
        period=parse_duration(period, what="--period-length"),
        assign=Assign(assign),
        tz=tz,
        layout=Layout(layout),
        coarse=coarse,
    )


@contextlib.contextmanager
def _id_lines(source: str) -> Iterator[tuple[IO[str], str]]:
    """The lines of an ids file (``-`` is stdin), streamed, with the name errors should use."""
    if source == "-":
        yield sys.stdin, "stdin"
        return
    try:
        handle = open(source, encoding="utf-8")  # noqa: SIM115 - closed below, errors reworded
    except OSError as error:
        raise InvalidInput(
            f"cannot read ids file {source}: {error.strerror}; give a file with one id per line, or - for stdin"
        ) from None
    with handle:
        yield handle, f"ids file {source}"


def _read_ids(source: str, *, require_int: bool, fix: str | None = None) -> list[RecordId]:
    """Ids one per line from ``source``; a line that is not an id under mod names its number."""
    with _id_lines(source) as (lines, name):
        try:
            return parse_ids(lines, name, require_int=require_int)
        except UnicodeDecodeError:
            raise InvalidInput(f"{name} is not UTF-8 text; give one id per line") from None
        except InvalidInput as error:
            if fix is None:
                raise
            raise InvalidInput(str(error).replace("use --assign hash for string ids", fix)) from None


def _one_id(text: str, assign: Assign) -> RecordId:
    """The ID argument: an int when it is an integer, else text (hashed as is under hash)."""
    if assign is Assign.MOD:
        try:
            return int(text.strip())
        except ValueError:
            raise InvalidInput(
                f"ID {text!r} is not an integer but --assign mod needs integer ids; use --assign hash for string ids"
            ) from None
    found = parse_ids([text], "ID")
    if not found:
        raise InvalidInput("ID is empty; give the record's id, e.g. 42 or user-42")
    return found[0]


def _when(moment: datetime) -> str:
    return moment.isoformat()


def _figure(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _print_warnings(console: Console, warnings: tuple[str, ...] | list[str]) -> None:
    for warning in warnings:
        console.print(f"[yellow]warning:[/] {warning}")


def _window_json(window: SlotWindow) -> dict[str, Any]:
    return {"window_start": _when(window.start), "window_end": _when(window.end), "window_exists": window.exists}


# -- the group ------------------------------------------------------------------------------------


@click.group(cls=Group)
@global_options
def slots() -> None:
    """Slot schemes: balance, where a time or an id falls, migrations, indexes and ledger reports."""


@slots.command("balance")
@global_options
@_slots_option
@_assign_option
@click.option("--ids", "ids_source", default="-", show_default=True, metavar="FILE|-", help="Ids one per line.")
@_json_option
@pass_settings
def balance_command(settings: Settings, slot_count: int, assign: str, ids_source: str, as_json: bool) -> None:
    """How evenly the ids fill B slots, what patterns they share with B, and mod or hash."""
    chosen = Assign(assign)
    if slot_count <= 0:  # before reading stdin, which may never end
        raise InvalidInput(f"--slots must be a positive integer, got {slot_count}; use e.g. --slots 24")
    ids = _read_ids(ids_source, require_int=chosen is Assign.MOD)
    report = balance(ids, slot_count, chosen)
    if as_json:
        emit_json(report.to_json())
        return
    _print_balance(settings.console, report)


def _print_balance(console: Console, report: BalanceReport) -> None:
    summary = FitTable(title=f"balance of {report.total:,} ids over {report.slots} slots ({report.assign.value})")
    summary.add_column("figure")
    summary.add_column("value", justify="right")
    for label, value in (
        ("mean", _figure(report.mean)),
        ("min", f"{report.min:,}"),
        ("max", f"{report.max:,}"),
        ("spread (max - min)", f"{report.spread:,}"),
        ("max / min", _figure(report.max_over_min, 3)),
        ("max vs mean", f"{_figure(report.max_dev_pct)} %"),
        ("min vs mean", f"{_figure(report.min_dev_pct)} %"),
        ("empty slots", str(len(report.empty_slots))),
    ):
        summary.add_row(label, value)
    console.print(summary)
    counts = FitTable(title="records per slot")
    counts.add_column("slot", justify="right")
    counts.add_column("records", justify="right")
    counts.add_column("vs mean", justify="right")
    for slot, count in enumerate(report.counts):
        deviation = (count - report.mean) / report.mean * 100 if report.mean else None
        counts.add_row(str(slot), f"{count:,}", f"{_figure(deviation)} %")
    console.print(counts)
    _print_warnings(console, report.warnings)
    console.print(f"recommendation: {report.recommendation}")


@slots.command("at")
@global_options
@click.argument("time_text", metavar="TIME")
@_slots_option
@_window_options
@_json_option
@_old_period
@pass_settings
def at_command(
    settings: Settings, time_text: str, slot_count: int, period: str, tz: str, layout: str, coarse: int | None,
    as_json: bool,
) -> None:
    """The period and slot TIME falls in, and that slot's window (a naive TIME is read in --tz)."""
    scheme = _scheme(slot_count, period, tz, layout=layout, coarse=coarse)
    moment = parse_time(time_text, tz=scheme.tz, what="TIME")
    position = scheme.locate(moment)
    document = {
        "period": position.period.key,
        "slot": position.slot,
        **_window_json(position.window),
        "time": _when(moment.astimezone(scheme.zone)),
        "period_start": _when(position.period.start),
        "period_end": _when(position.period.end),
        "scheme": scheme.fingerprint,
    }
    if as_json:
        emit_json(document)
        return
    _print_fields(settings.console, f"{time_text} in {scheme.fingerprint}", document)


def _print_fields(console: Console, title: str, document: dict[str, Any]) -> None:
    table = FitTable(title=title)
    table.add_column("field")
    table.add_column("value")
    for name, value in document.items():
        table.add_row(name, cell(value))
    console.print(table)


def _next_window(scheme: SlotScheme, slot: int, now: datetime) -> SlotWindow:
    """The slot's first window that has not ended by ``now`` (skipping one lost to spring forward)."""
    period = scheme.period_of(now)
    for _ in range(3):
        window = scheme.window(period, slot)
        if window.exists and window.end > now:
            return window
        period = scheme.period_after(period)
    return window


@slots.command("which")
@global_options
@click.argument("record_text", metavar="ID")
@_slots_option
@_assign_option
@_window_options
@click.option("--at", "at", default=None, metavar="TIME", help="Take this as now (ISO 8601; naive = --tz).")
@_json_option
@_old_period
@pass_settings
def which_command(
    settings: Settings, record_text: str, slot_count: int, assign: str, period: str, tz: str, layout: str,
    coarse: int | None, at: str | None, as_json: bool,
) -> None:
    """The slot of ID and its window in the current period (or in the period of --at)."""
    scheme = _scheme(slot_count, period, tz, assign=assign, layout=layout, coarse=coarse)
    record = _one_id(record_text, scheme.assign)
    slot = scheme.slot_of(record)
    now = parse_time(at, tz=scheme.tz, what="--at") if at is not None else SystemClock().now()
    current = scheme.period_of(now)
    window = scheme.window(current, slot)
    upcoming = _next_window(scheme, slot, now)
    document = {
        "slot": slot,
        "window_start": _when(window.start),
        "window_end": _when(window.end),
        "id": record,
        "period": current.key,
        "window_exists": window.exists,
        "now": _when(now.astimezone(scheme.zone)),
        "next_window_start": _when(upcoming.start),
        "scheme": scheme.fingerprint,
    }
    if as_json:
        emit_json(document)
        return
    _print_fields(settings.console, f"id {record_text} in {scheme.fingerprint}", document)


@slots.command("migrate")
@global_options
@click.option("--ids", "ids_source", required=True, metavar="FILE|-", help="Ids one per line.")
@click.option("--from", "old_text", required=True, metavar="SCHEME", help="The scheme now: 24, 24:hash, 48:nested.")
@click.option("--to", "new_text", required=True, metavar="SCHEME", help="The scheme to switch to.")
@click.option("--period-length", "period", default="1d", show_default=True, metavar="DURATION", help="The period length of both schemes.")
@click.option("--tz", default="UTC", show_default=True, metavar="ZONE", help="The zone of both schemes.")
@click.option(
    "--effective-from", "effective_text", default=None, metavar="TIME",
    help="The period boundary the switch takes effect at (default: the next one after now).",
)
@click.option("--from-offset", "old_offset", default="0s", show_default=True, metavar="DURATION",
              help="First run time in a slot now (e.g. 1m for runs at :01 and :31).")
@click.option("--to-offset", "new_offset", default=None, metavar="DURATION",
              help="First run time in a slot after the switch (the SchemeChange's offsets; default: --from-offset).")
@_json_option
@_old_period
@pass_settings
def migrate_command(
    settings: Settings, ids_source: str, old_text: str, new_text: str, period: str, tz: str,
    effective_text: str | None, old_offset: str, new_offset: str | None, as_json: bool,
) -> None:
    """What switching schemes does to the ids: who moves window, and the gaps across the switch."""
    first_old = parse_duration(old_offset, what="--from-offset")
    first_new = parse_duration(new_offset, what="--to-offset") if new_offset is not None else first_old
    length = parse_duration(period, what="--period-length")
    old = parse_scheme(old_text, period=length, tz=tz)
    new = parse_scheme(new_text, period=length, tz=tz)
    if effective_text is None:
        effective = new.period_of(SystemClock().now()).end
    else:
        effective = parse_time(effective_text, tz=tz, what="--effective-from")
    needs_int = Assign.MOD in (old.assign, new.assign)
    ids = _read_ids(ids_source, require_int=needs_int, fix="use hash schemes (e.g. 24:hash) for string ids")
    plan = migration_plan(ids, old, new, effective, old_offset=first_old, new_offset=first_new)
    document = {**plan.to_json(), "from": old.fingerprint, "to": new.fingerprint, "guarantee": _GUARANTEE}
    if as_json:
        emit_json(document)
        return
    _print_migration(settings.console, plan, old, new)


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:,.2f} h"


def _print_migration(console: Console, plan: MigrationPlan, old: SlotScheme, new: SlotScheme) -> None:
    table = FitTable(title=f"migration {old.fingerprint} -> {new.fingerprint}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for label, value in (
        ("records", f"{plan.total:,}"),
        ("move window", f"{plan.moved:,} ({plan.moved_pct:.2f} %)"),
        ("leave their old window", f"{plan.moved_out:,}"),
        ("takes effect", plan.effective_from),
        ("longest gap across the switch", _hours(plan.max_gap)),
        ("shortest gap across the switch", _hours(plan.min_gap)),
    ):
        table.add_row(label, value)
    console.print(table)
    console.print(_GUARANTEE)


@slots.command("index")
@global_options
@click.option("--target-db", "target_db", required=True, metavar="URL", help="The database holding the table.")
@click.option("--table", "table_name", required=True, metavar="T", help="The table to index.")
@click.option("--id", "id_column", default="id", show_default=True, metavar="COLUMN", help="Its stable id column.")
@_slots_option
@_assign_option
@click.option("--period-length", "period", default="1d", show_default=True, metavar="DURATION", help="The scheme's period length.")
@_json_option
@_old_period
@pass_settings
def index_command(
    settings: Settings, target_db: str, table_name: str, id_column: str, slot_count: int, assign: str, period: str,
    as_json: bool,
) -> int:
    """Add a slot column and a (slot, id) index to the table, then show the plan that uses it.

    Exit 1 when the plan of the slot query does not search the index.
    """
    scheme = _scheme(slot_count, period, "UTC", assign=assign)
    report = add_slot_index(target_db, table_name, id_column=id_column, scheme=scheme)
    if as_json:
        emit_json(report.to_json())
    else:
        _print_index(settings.console, report)
    return 0 if report.uses_index else 1


def _print_index(console: Console, report: SlotIndexReport) -> None:
    action = "added" if report.created else "already there:"
    console.print(f"{action} column {report.column} ({report.kind.value}) and index {report.index} on {report.table}")
    for title, query, plan, used in (
        ("slot query", report.query, report.plan, report.uses_index),
        ("plain modulo predicate", report.plain_query, report.plain_plan, report.plain_uses_index),
    ):
        table = FitTable(title=f"{title}: {'uses' if used else 'does not use'} {report.index}")
        table.add_column(query, wrap=True)
        for line in plan:
            table.add_row(line)
        console.print(table)
    if report.uses_index:
        console.print(f"[green]verified:[/] selecting one slot searches {report.index}")
    else:
        console.print(f"[red]not verified:[/] the slot query does not search {report.index}; see the plan above")


@slots.command("report")
@global_options
@click.argument("job_name", metavar="JOB")
@click.option("--period", "period_key", required=True, metavar="P", help="The period key, e.g. 2026-12-01.")
@click.option("--plot", "plot", default=None, metavar="FILE", help="Also write a bar chart (.svg, or .png).")
@_json_option
@pass_settings
def report_command(settings: Settings, job_name: str, period_key: str, plot: str | None, as_json: bool) -> None:
    """Per-slot load of JOB in period P from the ledger: counts, rows, bytes, durations, overruns."""
    if plot is not None:
        check_chart_path(plot)
    job = load_app(settings.app).get_slot_job(job_name)
    job.scheme.period_for_key(period_key)  # a bad key fails before the store is opened
    with settings.open_store(StoreUse.EXISTING) as store:
        report = ledger_report(store, job, period_key)
    written = write_chart(plot, report) if plot is not None else None
    if as_json:
        document = report.to_json()
        if written is not None:
            document["plot"] = str(written)
        emit_json(document)
        return
    _print_report(settings.console, report, written)


def _print_report(console: Console, report: LedgerReport, written: Path | None) -> None:
    table = FitTable(
        title=f"{report.job} period {report.period} ({report.scheme}): durations in ms, tick interval "
        f"{report.tick_interval_ms / 1000:,.0f} s"
    )
    columns = ("slot", "records", "rows", "bytes", "p50", "p95", "max", "total", "failed", "not done", "overrun")
    for column in columns:
        table.add_column(column, justify="right", overflow="fold")
    for load in report.slots:
        missing = f"{load.not_done:,}"
        table.add_row(
            str(load.slot), f"{load.count:,}", f"{load.rows:,}", f"{load.bytes:,}", _figure(load.p50_ms, 1),
            _figure(load.p95_ms, 1), _figure(load.max_ms, 1), _figure(load.total_ms, 1), f"{load.failed:,}",
            f"[red]{missing}[/]" if load.not_done and report.closed else missing,
            "[red]yes[/]" if load.overrun else "",
        )
    console.print(table)
    state = "closed for good" if report.closed else "open"
    console.print(
        f"not done: {report.not_done:,} records; the period is {state} "
        f"(ticks can take its records until {report.closes_at.isoformat() if report.closes_at else '-'})"
    )
    _print_warnings(console, report.warnings)
    if written is not None:
        console.print(f"chart written to {written}")


@slots.command("backfill")
@global_options
@click.argument("job_name", metavar="JOB")
@click.option("--period", "period_key", required=True, metavar="P", help="A closed period's key, e.g. 2026-12-01.")
@click.option("--dry-run", is_flag=True, help="Only say how many records would run, per slot; write nothing.")
@_json_option
@pass_settings
def backfill_command(settings: Settings, job_name: str, period_key: str, dry_run: bool, as_json: bool) -> int:
    """Run exactly the not-done records of JOB in period P, closed beyond the backlog's reach.

    The ledger keeps it exactly-once: a record done in the meantime (or by a second backfill) is not
    run again. Exit 0 when every record ran (or there was nothing to do), 1 when some failed, 2 when P
    is not a closed period of JOB.
    """
    job = load_app(settings.app).get_slot_job(job_name)
    job.scheme.period_for_key(period_key)  # a bad key fails before the store is opened
    with settings.open_store(StoreUse.EXISTING) as store:
        report = backfill(store, job, period_key, dry_run=dry_run)
    if as_json:
        emit_json(report.to_json())
    else:
        _print_backfill(settings.console, report)
    return 1 if report.tick is not None and report.tick.failed else 0


def _print_backfill(console: Console, report: BackfillReport) -> None:
    document = report.to_json()
    name, period = document["job"], document["period"]
    if not document["not_done"]:
        console.print(f"nothing to do: every record of {name} in period {period} is done")
        return
    table = FitTable(title=f"{name} period {period}: records not done" + (" (dry run: nothing written)" if report.dry_run else ""))
    table.add_column("slot", justify="right")
    table.add_column("not done" if report.dry_run else "ran", justify="right")
    if not report.dry_run:
        table.add_column("still not done", justify="right")
    for entry in document["slots"]:
        row = [str(entry["slot"]), f"{entry['not_done']:,}"]
        if not report.dry_run:
            row.append(f"{entry['still_not_done']:,}")
        table.add_row(*row)
    console.print(table)
    if report.dry_run:
        console.print(f"would run {document['not_done']:,} records; run again without --dry-run to run them")
    else:
        console.print(
            f"done {document['done']:,}, failed {document['failed']:,}; "
            f"{document['still_not_done']:,} still not done"
        )
