"""``vardiya worker`` and ``vardiya invoke call|submit|append|status|metrics``: the invocation models.

``worker`` runs async calls and stream batches until SIGTERM (drain, exit 0) or, with ``--until-idle``,
until none is left. The ``invoke`` commands are the caller's side, for scripts and for trying a handler
by hand: the payload is JSON (``--payload``) or a file of JSON lines (``--payloads``, ``-`` for stdin).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from ..app import load_app
from ..errors import InvalidInput, InvalidRecord, VardiyaError
from ..invoke.invoker import Invoker, call_key, call_payloads, check_appends
from ..invoke.settings import positive_duration
from ..output import FitTable, cell, progress
from ..service.worker import Worker, WorkerSettings
from ..times import parse_time
from .commands import Group, renamed_option
from .context import Settings, StoreUse, emit_json, global_options, pass_settings
from .services import (
    check_names,
    log_start,
    service_options,
    service_store,
    while_signalled,
)

__all__ = ["invoke", "worker"]


@click.command()
@global_options
@click.option("--concurrency", type=int, default=1, show_default=True, help="Threads running work.")
@click.option("--until-idle", is_flag=True, help="Exit once no work of the app is left to run.")
@click.option("--lease", type=float, default=30.0, show_default=True, help="Seconds a claim holds an item between heartbeats.")
@click.option("--prefetch", type=int, default=100, show_default=True, help="Async calls or batches claimed at a time per thread.")
@click.option(
    "--only", "names", multiple=True, metavar="NAME",
    help="Only this handler, slot job, pipeline or periodic function (repeatable).",
)
@click.option(
    "--queue", "queues", multiple=True, metavar="NAME",
    help="Claim only the items of this named queue (repeatable; default: every queue). Ticks, pipeline runs"
    " and periodic functions are in the queue 'default'.",
)
@service_options
@click.option("--json", "as_json", is_flag=True, help="Print the worker's report as one JSON document.")
@renamed_option("--handler", "--only", "names", multiple=True, metavar="NAME")
@pass_settings
def worker(
    settings: Settings,
    concurrency: int,
    until_idle: bool,
    lease: float,
    prefetch: int,
    names: tuple[str, ...],
    queues: tuple[str, ...],
    metrics_port: int | None,
    log_format: str,
    as_json: bool,
) -> int:
    """Run the app's ticks, pipeline runs, periodic functions, async calls and stream batches. SIGTERM drains, exits 0."""
    app = load_app(settings.app)
    if not (app.handlers or app.slot_jobs or app.pipelines or app.periodic):
        raise InvalidInput(
            f"app {app.name!r} declares no handlers, slot jobs, pipelines or periodic functions; "
            "declare one with @app.handler(...) or @app.every(...)"
        )
    check_names(app, names, "--only")
    # Bad settings are refused here, before the store is opened: nothing is written.
    options = WorkerSettings(
        concurrency=concurrency, lease=positive_duration(lease, "--lease"), prefetch=prefetch, names=names,
        queues=queues,
    )
    Worker.check(app, options)
    with service_store(settings, log_format, metrics_port) as (store, metrics):
        running = Worker(store, app, options, metrics=metrics)
        chosen = options.queues
        what = "work items of those kinds" + (f" in the queues {', '.join(chosen)}" if chosen else "")
        log_start("worker", store, app, running.owner, _worker_runs(running), what)
        # SIGTERM (and Ctrl-C) drain: the item in hand is finished, the rest released, exit 0.
        with _counting(settings, running, until_idle):
            report = while_signalled(running.stop, lambda: running.run(until_idle=until_idle))
    if as_json:
        emit_json(report.to_json())
    else:
        table = FitTable(title=f"worker {running.owner}")
        for name in report.to_json():
            table.add_column(name.replace("_", " "), justify="right")
        table.add_row(*(cell(value) for value in report.to_json().values()))
        settings.console.print(table)
    return 0


def _worker_runs(running: Worker) -> list[str]:
    services = running.services.kinds if running.services is not None else []
    return [*running.handlers, *services]


@contextlib.contextmanager
def _counting(settings: Settings, running: Worker, until_idle: bool) -> Iterator[None]:
    """With --until-idle on a terminal, the worker's counts as they grow; nothing when piped."""
    if not until_idle:
        yield
        return
    with progress(settings.console, "worker", None) as advance:
        done = threading.Event()

        def show() -> None:
            while not done.wait(0.2):
                counts = running.report
                advance(0, f"{counts.items:,} item(s): {counts.succeeded:,} succeeded, {counts.retried:,} retried, "
                           f"{counts.dead:,} dead; {counts.ticks:,} tick(s), {counts.pipeline_runs:,} pipeline run(s)")

        watcher = threading.Thread(target=show, name="vardiya-progress", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            done.set()
            watcher.join(timeout=2)


def _payloads(payload: str | None, payloads: str | None) -> tuple[list[Any], list[str]]:
    """The records, and where each came from (``--payload``, ``line 7 of FILE``) for messages."""
    if (payload is None) == (payloads is None):
        raise InvalidInput("give exactly one of --payload JSON or --payloads FILE (JSON lines, - for stdin)")
    if payload is not None:
        return [_json(payload, "--payload")], ["--payload"]
    assert payloads is not None
    text = sys.stdin.read() if payloads == "-" else _read(payloads)
    lines = [(f"line {number} of {payloads}", line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    return [_json(line, where) for where, line in lines], [where for where, _ in lines]


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise InvalidInput(f"cannot read --payloads {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        line = error.object[: error.start].count(b"\n") + 1
        raise InvalidInput(f"line {line} of {path}: byte {error.object[error.start]:#04x} is not UTF-8 text") from None


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidInput(f"{what} is not valid JSON ({error.msg} at column {error.colno})") from None


@click.group(cls=Group)
@global_options
def invoke() -> None:
    """The caller's side: call (sync), submit and status (async), append (stream), metrics."""


_payload_options = [
    click.option("--payload", metavar="JSON", help="One record, as JSON."),
    click.option("--payloads", metavar="FILE", help="Records as JSON lines (- for stdin)."),
]


def _with_payloads(command: Any) -> Any:
    for option in reversed(_payload_options):
        command = option(command)
    return command


@invoke.command("call")
@global_options
@click.argument("name", metavar="HANDLER")
@click.option("--payload", metavar="JSON", required=True, help="The record, as JSON.")
@click.option("--key", default=None, help="Dedup key (else the handler's key function); only for a handler with Dedup.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@pass_settings
def call_command(settings: Settings, name: str, payload: str, key: str | None, as_json: bool) -> int:
    """Call HANDLER now (sync) and print its result; its error exits 1 after the caller's retries."""
    app = load_app(settings.app)
    handler = app.get_handler(name)
    record = _json(payload, "--payload")
    try:
        call_key(handler, record, key)  # before the store is opened: bad input writes nothing
    except InvalidRecord as error:
        raise InvalidInput(f"--payload: {error.reason}") from None
    with settings.open_store(StoreUse.CREATE) as store:
        try:
            result = Invoker(store, app).call(name, record, key=key)
        except VardiyaError:
            raise  # bad input or a store failure: one line and exit 2, as for every command
        except Exception as error:  # noqa: BLE001 - the handler's own error reaches the caller: exit 1
            click.echo(f"vardiya: {name} failed: {type(error).__name__}: {error}", err=True)
            return 1
    if as_json:
        emit_json({"handler": name, "result": result})
    else:
        settings.console.print(f"{name} returned: {escape(json.dumps(result, ensure_ascii=False, default=str))}")
    return 0


def _store_records(
    settings: Settings, name: str, payload: str | None, payloads: str | None, key: str | None, *, stream: bool
) -> list[int]:
    """Submit (async) or append (stream) the records; the handler and every record are checked before
    the store is opened, so bad input writes nothing."""
    app = load_app(settings.app)
    handler = app.get_handler(name)
    records, places = _payloads(payload, payloads)
    if key is not None and not stream and len(records) != 1:
        raise InvalidInput(
            f"--key names one call, and {payloads} holds {len(records)} records; "
            "give --key with a single --payload (each call its own key)"
        )
    keys = [key] * len(records) if key is not None else None
    try:
        if stream:
            check_appends(handler, records, keys)
        else:
            call_payloads(handler, records, keys)
    except InvalidRecord as error:
        raise InvalidInput(f"{places[error.index]}: {error.reason}") from None
    with settings.open_store(StoreUse.CREATE) as store:
        invoker = Invoker(store, app)
        if stream:
            return invoker.append_many(name, records, keys=keys)
        return [handle.id for handle in invoker.submit_many(name, records, keys=keys)]


@invoke.command("submit")
@global_options
@click.argument("name", metavar="HANDLER")
@_with_payloads
@click.option(
    "--key", default=None,
    help="With Dedup, the call's dedup key; without, its idempotency key (a second submit with it stores nothing). One --payload only.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the handles as one JSON document.")
@pass_settings
def submit_command(
    settings: Settings, name: str, payload: str | None, payloads: str | None, key: str | None, as_json: bool
) -> int:
    """Store async calls of HANDLER; prints their handles (a worker runs them)."""
    ids = _store_records(settings, name, payload, payloads, key, stream=False)
    if as_json:
        emit_json({"handler": name, "handles": ids})
    else:
        settings.console.print(f"submitted {len(ids)} call(s) of {name}" + (f": handles {ids[0]}..{ids[-1]}" if ids else ""))
    return 0


@invoke.command("append")
@global_options
@click.argument("name", metavar="HANDLER")
@_with_payloads
@click.option("--key", default=None, help="Order key (records of one key are consumed in order).")
@click.option("--json", "as_json", is_flag=True, help="Print the offsets as one JSON document.")
@pass_settings
def append_command(
    settings: Settings, name: str, payload: str | None, payloads: str | None, key: str | None, as_json: bool
) -> int:
    """Append records to HANDLER's stream; prints their offsets."""
    offsets = _store_records(settings, name, payload, payloads, key, stream=True)
    if as_json:
        emit_json({"handler": name, "offsets": offsets})
    else:
        settings.console.print(f"appended {len(offsets)} record(s) to {name}" + (f": offsets {offsets[0]}..{offsets[-1]}" if offsets else ""))
    return 0


@invoke.command("status")
@global_options
@click.argument("handle", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_settings
def status_command(settings: Settings, handle: int, as_json: bool) -> int:
    """Where the async call HANDLE stands: state, attempts, result or error, history."""
    with settings.open_store(StoreUse.EXISTING) as store:
        status = Invoker(store, {}).status(handle)
    document = {
        "id": status.id,
        "handler": status.handler,
        "queue": status.queue,
        "state": status.state.value,
        "attempts": status.attempts,
        "max_attempts": status.max_attempts,
        "result": status.result,
        "error": status.error,
        "history": [
            {"attempt": a.attempt, "outcome": a.outcome.value, "error": a.error, "ended_at": a.ended_at.isoformat()}
            for a in status.history
        ],
    }
    if as_json:
        emit_json(document)
    else:
        settings.console.print(
            f"call {status.id} of {status.handler} (queue {status.queue}): {status.state.value} after {status.attempts}/{status.max_attempts} attempt(s)"
            + (f"; last error: {status.error}" if status.error else "")
        )
    return 0


@invoke.command("metrics")
@global_options
@click.argument("name", metavar="HANDLER")
@click.option("--model", type=click.Choice(["async", "stream"]), default=None, help="Which of its work (default: its model).")
@click.option("--since", metavar="TIME", default=None, help="Only work that arrived at or after TIME (ISO 8601, UTC if naive): one run.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_settings
def metrics_command(settings: Settings, name: str, model: str | None, since: str | None, as_json: bool) -> int:
    """The metrics of HANDLER's async or stream work in the store (a run: --since)."""
    app = load_app(settings.app)
    handler = app.get_handler(name)
    from ..invoke.handlers import Model
    from ..invoke.metrics import store_metrics

    if model is None and handler.model is Model.SYNC:
        raise InvalidInput(f"handler {name!r} is sync, which leaves no metrics in the store; pass --model async or stream")
    start = parse_time(since, tz="UTC", what="--since") if since else None
    with settings.open_store(StoreUse.EXISTING) as store:
        figures = store_metrics(store, handler.with_model(model) if model else handler, since=start)
    document = figures.to_json()
    if as_json:
        emit_json(document)
    else:
        table = FitTable(title=f"{name} ({document['model']})")
        table.add_column("metric")
        table.add_column("value", justify="right")
        for key, value in document.items():
            if key not in ("handler", "model"):
                table.add_row(key, cell(value, digits=1) if isinstance(value, float) else cell(value))
        settings.console.print(table)
    return 0
