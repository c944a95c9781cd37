"""Demo section: one validation function under sync, async and stream, on the demo's virtual clock.

The first readings of the example night (``vardiya.examples.meter_validation``) go through every
model: sync calls with the caller's retry, async calls through a worker, and the stream under each
failure policy, once more with 24 h dedup keys. The retries' 60 s waits pass on the virtual clock, so
the section takes seconds. The comparison shows who pays for a poison reading: the caller (sync), one
dead letter (async, bisect), or a whole batch of healthy readings (retry_batch). Then, 72 h later, the
dead letters are redriven: with dedup keys the healthy readings of a dead batch are skipped.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..clock import VirtualClock
from ..examples.meter_validation import NIGHT_CSV, Outcome, build_app, load_outcomes, load_records
from ..invoke import dlq
from ..invoke.invoker import Invoker
from ..output import FitTable
from ..service.worker import Worker, WorkerSettings
from ..store import Store

__all__ = ["invocation_section"]

#: Enough of the night for both of its first poison readings, few enough to keep the demo quick.
READINGS = 1_000
#: The spec's "dead letters are redriven by hand after 72 h", well past the 24 h dedup window.
REDRIVE_AFTER = timedelta(hours=72)
#: Figure name -> (row label, handler).
MODELS = {
    "sync": ("sync", "validate_sync"),
    "async": ("async", "validate_async"),
    "retry_batch": ("stream retry_batch", "validate_stream"),
    "bisect": ("stream bisect", "validate_stream_bisect"),
    "report_failures": ("stream report", "validate_stream_report"),
    "retry_batch_dedup": ("stream + dedup", "validate_stream_dedup"),
}

#: The metrics each model's figures keep.
FIGURES = ("calls", "processed", "unique", "extra", "dead_letter", "co_failed", "caller_errors")


class _Collected(logging.Handler):
    """Keeps the worker's log records: the dead-letter errors the engine reports."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _worker_log() -> Iterator[_Collected]:
    """Collect the worker's errors instead of letting them spill onto stderr mid-table."""
    logger = logging.getLogger("vardiya.worker")
    collected = _Collected()
    propagate = logger.propagate
    logger.addHandler(collected)
    logger.propagate = False
    try:
        yield collected
    finally:
        logger.removeHandler(collected)
        logger.propagate = propagate


def invocation_section(
    *, directory: Path, store: Store, clock: VirtualClock, console: Console
) -> tuple[str, dict[str, Any]]:
    """Validate the same readings under every model and policy, compare them, redrive the dead letters."""
    outcomes = load_outcomes(NIGHT_CSV)
    records = load_records(NIGHT_CSV, limit=READINGS)
    night = [outcomes[record["id"]] for record in records]
    transient, poison = night.count(Outcome.TRANSIENT), night.count(Outcome.POISON)
    console.print(
        f"\n[bold]4. Invocation models[/]: the first {len(records):,} readings of the night "
        f"({transient} transient, {poison} poison), one validation function, three models"
    )
    app = build_app(NIGHT_CSV)
    invoker = Invoker(store, app)

    caller_errors: list[str] = []
    for record in records:
        try:
            invoker.call("validate_sync", record)
        except Exception as error:  # noqa: BLE001 - in the sync model the error is the caller's to see
            caller_errors.append(f"{type(error).__name__}: {error}")
    invoker.submit_many("validate_async", records)
    for key in ("retry_batch", "bisect", "report_failures", "retry_batch_dedup"):
        invoker.append_many(MODELS[key][1], records)
    started = clock.now()
    with _worker_log() as logged:
        worker = Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    night_took = clock.now() - started

    metrics = {key: invoker.metrics(handler) for key, (_, handler) in MODELS.items()}
    table = Table(
        title=f"{len(records):,} readings, one validation function (virtual clock)",
        caption="dead: dead-lettered records; p99: arrival to final outcome",
    )
    for column in ("model", "calls", "processed", "extra", "dead", "co-failed", "p99"):
        table.add_column(column, justify="left" if column == "model" else "right", no_wrap=True)
    for key, (label, _) in MODELS.items():
        measured = metrics[key]
        table.add_row(
            label, f"{measured.calls:,}", f"{measured.processed:,}", f"{measured.extra:,}",
            f"{measured.dead_letter:,}", f"{measured.co_failed:,}", f"{measured.completion_p99_ms / 1000:.3g} s",
        )
    console.print(table)
    example = f" (e.g. {caller_errors[0]})" if caller_errors else ""
    console.print(
        f"sync: the caller saw {len(caller_errors)} error(s) itself{example}; async and stream: the worker took "
        f"{night_took.total_seconds():g} virtual s for its retries and logged {len(logged.messages)} dead "
        "letter(s), which wait in the dead-letter store"
    )

    handlers = [handler for key, (_, handler) in MODELS.items() if key != "sync"]
    letters = [letter for handler in handlers for letter in dlq.dead_letters(store, handler=handler)]
    dead_table = FitTable(title=f"dead letters after 3 attempts: the first of each handler ({len(letters)} in all)")
    for column in ("id", "model", "records", "co-failed"):
        dead_table.add_column(column, justify="left" if column == "model" else "right", no_wrap=True)
    dead_table.add_column("last error", wrap=True)
    label_of = {handler: name for name, handler in MODELS.values()}
    for letter in _one_per_handler(letters):
        dead_table.add_row(
            str(letter.id), label_of[letter.handler], str(letter.records), str(letter.co_failed),
            escape(letter.error or ""),
        )
    console.print(dead_table)

    clock.advance(REDRIVE_AFTER)
    before = {key: metrics[key].processed for key in MODELS if key != "sync"}
    redriven = dlq.redrive(store, ids=[letter.id for letter in letters])
    with _worker_log():
        Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    after = {key: invoker.metrics(MODELS[key][1]) for key in before}
    reprocessed = {key: after[key].processed - before[key] for key in before}
    dead_again = sum(len(dlq.dead_letters(store, handler=handler)) for handler in handlers)
    console.print(
        f"{REDRIVE_AFTER.total_seconds() / 3600:g} h later: redrove {redriven.items} dead letter(s), "
        f"{redriven.records:,} record(s); {redriven.already_succeeded} had already succeeded and were skipped "
        f"(dedup keys kept alive past the 24 h window; {redriven.would_reprocess_without_retention} would "
        "otherwise have run again)"
    )
    console.print(
        "records processed again by the redrive: "
        + ", ".join(f"{label_of[MODELS[key][1]]} {count:,}" for key, count in reprocessed.items())
        + f"; the poison readings are still poison: {dead_again} dead letter(s) again"
    )

    figures = {
        "readings": len(records),
        "transient": transient,
        "poison": poison,
        "models": {
            key: {name: measured.to_json()[name] for name in FIGURES}
            | {"p99_s": round(measured.completion_p99_ms / 1000, 3)}
            for key, measured in metrics.items()
        },
        "caller_errors": len(caller_errors),
        "worker": worker.to_json(),
        "logged_dead_letters": len(logged.messages),
        "dead_letters": len(letters),
        "redrive": redriven.to_json(),
        "reprocessed_by_redrive": reprocessed,
        "dead_after_redrive": dead_again,
    }
    return "invocation", figures


def _one_per_handler(letters: list[dlq.DeadLetter]) -> list[dlq.DeadLetter]:
    """The oldest dead letter of each handler: a glimpse of the listing, not all of it."""
    shown: dict[str, dlq.DeadLetter] = {}
    for letter in letters:
        shown.setdefault(letter.handler, letter)
    return list(shown.values())
