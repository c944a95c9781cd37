"""``vardiya dlq list|show|redrive|purge``: the dead-letter store of async calls and stream batches."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.markup import escape

from ..errors import InvalidInput
from ..invoke import dlq as letters
from ..output import FitTable, cell
from ..rules.rates import parse_rate_limit
from ..times import parse_duration
from .commands import Group
from .context import Settings, StoreUse, emit_json, global_options, pass_settings

__all__ = ["dlq"]

def _rate(text: str | None) -> float | None:
    """``--rate`` in items per second, spelled as a handler's ``rate_limit`` is (one parser for both:
    ``rules.rates.parse_rate_limit``, so ``10/s``, ``30/m`` and ``500/h`` mean the same everywhere)."""
    if text is None:
        return None
    try:
        return parse_rate_limit(text).per_second
    except InvalidInput as error:
        raise InvalidInput(f"--rate {text!r} is not a rate: {error}") from None


def _age(text: str | None) -> float | None:
    return None if text is None else parse_duration(text, what="--older-than").total_seconds()


def _filters(command: Any) -> Any:
    command = click.option("--id", "ids", type=int, multiple=True, help="Only these dead letters (repeatable).")(command)
    command = click.option("--error", "error", metavar="TEXT", help="Only those whose last error contains TEXT.")(command)
    command = click.option("--older-than", metavar="DURATION", help="Only those dead for longer (e.g. 72h).")(command)
    return click.option("--handler", metavar="NAME", help="Only this handler's.")(command)


@click.group(cls=Group)
@global_options
def dlq() -> None:
    """Dead letters: async calls and stream batches that ran out of attempts, with their history."""


@dlq.command("list")
@global_options
@_filters
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_settings
def list_command(
    settings: Settings, handler: str | None, older_than: str | None, error: str | None, ids: tuple[int, ...], as_json: bool
) -> int:
    """List dead letters, oldest first."""
    age = _age(older_than)  # bad options are reported before the store is opened
    with settings.open_store(StoreUse.EXISTING) as store:
        found = letters.dead_letters(store, handler=handler, older_than_s=age, error=error, ids=ids or None)
    if as_json:
        emit_json({"dead_letters": [letter.to_json() for letter in found], "total": len(found),
                   "records": sum(letter.records for letter in found)})
        return 0
    table = FitTable(title=f"{len(found)} dead letter(s), times in UTC")
    for column in ("id", "handler", "model", "records", "co-failed", "tries"):
        table.add_column(column, justify="right" if column in ("id", "records", "co-failed", "tries") else "left")
    table.add_column("dead since")
    table.add_column("error", wrap=True)
    for letter in found:
        table.add_row(str(letter.id), letter.handler, letter.model, str(letter.records), str(letter.co_failed),
                      str(letter.attempts), f"{letter.dead_since:%Y-%m-%d %H:%M}", escape(letter.error or ""))
    settings.console.print(table)
    return 0


@dlq.command("show")
@global_options
@click.argument("item_id", metavar="ID", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_settings
def show_command(settings: Settings, item_id: int, as_json: bool) -> int:
    """One dead letter: its records, every attempt (with its traceback), every handler call, its dedup keys."""
    with settings.open_store(StoreUse.EXISTING) as store:
        document = letters.show(store, item_id)
        tracebacks = store.failures.attempt_tracebacks(item_id)
    for attempt, text in zip(document["history"], tracebacks, strict=False):  # in history order; read apart: one may be longer
        attempt["traceback"] = text
    if as_json:
        emit_json(document)
        return 0
    console = settings.console
    console.print(f"dead letter {document['id']}: {document['handler']} ({document['model']}), "
                  f"{len(document['records'])} record(s), {document['attempts']}/{document['max_attempts']} attempts")
    console.print(f"last error: {cell(document['error'])}")
    history = FitTable(title="attempts (UTC)")
    for column in ("attempt", "outcome", "ended at"):
        history.add_column(column)
    history.add_column("error", wrap=True)
    for attempt in document["history"]:
        history.add_row(str(attempt["attempt"]), attempt["outcome"], attempt["ended_at"], escape(attempt["error"] or ""))
    console.print(history)
    for attempt in document["history"]:
        if attempt.get("traceback"):
            console.print(f"attempt {attempt['attempt']} traceback:")
            console.print("\n".join("    " + line for line in escape(attempt["traceback"]).splitlines()), soft_wrap=True)
    shown = document["records"][:20]
    records = FitTable(title=f"records ({len(shown)} of {len(document['records'])} shown; --json lists them all)")
    records.add_column("record", wrap=True)
    records.add_column("processed", justify="right")
    for record in shown:
        records.add_row(escape(json.dumps(record["record"])), cell(record["processed"]))
    console.print(records)
    return 0


@dlq.command("redrive")
@global_options
@_filters
@click.option(
    "--rate", metavar="N/s",
    help="Make at most N items ready per second, minute or hour (10/s, 30/m, 500/h; spaced out, not all at once).",
)
@click.option("--max-attempts", type=int, default=None, help="A new attempt budget (default: the item's own).")
@click.option("--dry-run", is_flag=True, help="Say what would be redriven; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_settings
def redrive_command(
    settings: Settings, handler: str | None, older_than: str | None, error: str | None, ids: tuple[int, ...],
    rate: str | None, max_attempts: int | None, dry_run: bool, as_json: bool,
) -> int:
    """Make dead letters ready again; records that had already succeeded are not processed twice."""
    per_s, age = _rate(rate), _age(older_than)  # bad options are reported before the store is opened
    letters.check_redrive(rate_per_s=per_s, max_attempts=max_attempts)
    with settings.open_store(StoreUse.EXISTING) as store:
        report = letters.redrive(store, handler=handler, older_than_s=age, error=error, ids=ids or None,
                                 rate_per_s=per_s, max_attempts=max_attempts, dry_run=dry_run)
    if as_json:
        emit_json(report.to_json())
        return 0
    verb = "would redrive" if dry_run else "redrove"
    settings.console.print(
        f"{verb} {report.items} dead letter(s), {report.records} record(s)"
        + (f", at {per_s:g}/s until {report.last_ready_at}" if per_s and report.items else "")
    )
    settings.console.print(
        f"{report.already_succeeded} record(s) had already succeeded and "
        + ("would be skipped" if dry_run else "will be skipped")
        + "; "
        f"{report.would_reprocess_without_retention} of them are past their dedup window and would be "
        "processed a second time if their keys had expired with it"
    )
    return 0


@dlq.command("purge")
@global_options
@_filters
@click.option("--dry-run", is_flag=True, help="Say what would be purged; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_settings
def purge_command(
    settings: Settings, handler: str | None, older_than: str | None, error: str | None, ids: tuple[int, ...],
    dry_run: bool, as_json: bool,
) -> int:
    """Delete dead letters and their history for good."""
    if not (handler or older_than or error or ids):
        raise InvalidInput("purge deletes for good: name what to purge with --handler, --older-than, --error or --id")
    age = _age(older_than)
    with settings.open_store(StoreUse.EXISTING) as store:
        report = letters.purge(store, handler=handler, older_than_s=age, error=error, ids=ids or None,
                               dry_run=dry_run)
    if as_json:
        emit_json(report)
    else:
        verb = "would purge" if dry_run else "purged"
        settings.console.print(f"{verb} {report['items']} dead letter(s), {report['records']} record(s)")
    return 0
