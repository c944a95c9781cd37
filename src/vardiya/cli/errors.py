"""``vardiya errors``: what failed and why, newest first, with tracebacks; and the failures summary
that ``vardiya tick`` and ``vardiya replay`` end with."""

from __future__ import annotations

from datetime import datetime

import click
from rich.console import Console
from rich.markup import escape

from ..errors import InvalidInput
from ..output import FitTable
from ..slots.failures import FailureTally
from ..store.failures import Failure, FailureFamily
from ..times import parse_duration, parse_time
from .context import Settings, StoreUse, emit_json, global_options, pass_settings

__all__ = ["errors_command", "print_failures"]

#: The most failures one listing shows.
LIMIT_MAX = 10_000


def print_failures(console: Console, tally: FailureTally | None) -> None:
    """The end of a tick or replay that failed records: counts by error, the first records, the command."""
    if tally is None or not tally.count:
        return
    console.print(f"failures: {tally.count} record(s)")
    for line, count in tally.ranked()[:5]:
        console.print(f"  {count:>6}  {escape(line)}")
    for period, record, error in tally.first:
        console.print(f"  record {escape(record)} (period {period}): {escape(error)}")
    console.print(f"the rest, with tracebacks: {tally.command}")


def _since(text: str | None, now: datetime) -> datetime | None:
    """``--since``: an ISO 8601 time (naive = UTC) or a duration back from now (``2h``, ``1d``)."""
    if text is None:
        return None
    if text[:1].isdigit() and not any(mark in text for mark in "-:T"):
        return now - parse_duration(text, what="--since")
    return parse_time(text, tz="UTC", what="--since")


def _choose(job: str | None, handler: str | None, pipeline: str | None) -> tuple[FailureFamily | None, str | None]:
    given = [(family, name) for family, name in (
        (FailureFamily.JOB, job), (FailureFamily.HANDLER, handler), (FailureFamily.PIPELINE, pipeline),
    ) if name is not None]
    if len(given) > 1:
        raise InvalidInput("give at most one of --job, --handler and --pipeline")
    return given[0] if given else (None, None)


def _row_text(failure: Failure) -> tuple[str, str, str, str, str]:
    attempt = f" attempt {failure.attempt}" if failure.attempt is not None else ""
    state = f" ({failure.state} now)" if failure.state else ""
    return (
        f"{failure.failed_at:%Y-%m-%d %H:%M:%S}", failure.family.value, failure.name,
        f"{failure.what}{attempt}{state}", failure.error,
    )


@click.command("errors")
@global_options
@click.option("--job", metavar="NAME", help="Only this slot job's failed records (and its tick items).")
@click.option("--handler", metavar="NAME", help="Only this handler's failed attempts.")
@click.option("--pipeline", metavar="NAME", help="Only this pipeline's failed tasks (and its run items).")
@click.option("--since", metavar="TIME|DURATION", help="Only failures since then: ISO 8601 (naive = UTC) or back from now (2h, 1d).")
@click.option("--limit", type=int, default=20, show_default=True, help="Show at most this many, newest first.")
@click.option("--traceback", "tracebacks", is_flag=True, help="Print each failure's traceback under it.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (tracebacks always in it).")
@pass_settings
def errors_command(
    settings: Settings, job: str | None, handler: str | None, pipeline: str | None, since: str | None,
    limit: int, tracebacks: bool, as_json: bool,
) -> int:
    """What failed and why, newest first: failed records, work item attempts and pipeline tasks.

    Each failure shows its error line; --traceback (and --json) add where it was raised (the last
    8 KB of the traceback). Times in UTC.
    """
    family, name = _choose(job, handler, pipeline)
    if not 1 <= limit <= LIMIT_MAX:
        raise InvalidInput(f"--limit {limit} is out of range; give a number from 1 to {LIMIT_MAX}")
    with settings.open_store(StoreUse.EXISTING) as store:
        moment = _since(since, store.clock.now())
        found = store.failures.listing(family=family, name=name, since=moment, limit=limit)
    if as_json:
        emit_json({"failures": [failure.to_json() for failure in found], "limit": limit})
        return 0
    console = settings.console
    if not found:
        named = f" of {family.value} {name}" if family is not None and name else ""
        console.print("no failures" + named + (f" since {since}" if since else ""))
        return 0
    if tracebacks:
        for failure in found:
            when, kind, who, what, error = _row_text(failure)
            console.print(f"{when} UTC  {kind} {escape(who)}  {escape(what)}")
            console.print(f"  {escape(error)}")
            text = failure.traceback or "(no traceback kept: the failure raised no exception, or predates vardiya 0010)"
            console.print("\n".join("    " + line for line in escape(text).splitlines()), soft_wrap=True)
            console.print()
        return 0
    table = FitTable(title=f"failures, newest first (UTC; {len(found)} shown, --limit {limit})")
    for column in ("when", "family", "name", "what"):
        table.add_column(column)
    table.add_column("error", wrap=True)
    for failure in found:
        table.add_row(*(escape(text) for text in _row_text(failure)))
    table.caption = "--traceback shows where each was raised"
    console.print(table)
    return 0
