"""``vardiya scheduler`` and ``vardiya status``: the scheduler as a process, and what the store says.

``scheduler`` fires the app's planned ticks and pipeline triggers as work items until SIGTERM or
SIGINT (it finishes the step in hand and exits 0); ``worker`` (in ``cli/invoke.py``) runs them.
Both take ``--metrics-port`` (a Prometheus endpoint) and ``--log-format json`` (structured logs).
``status`` exits 1 when what it reports is unhealthy, 0 when healthy (as ``systemctl is-active`` and
monitoring checks expect), 2 on bad input.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import click
from rich.markup import escape

from ..app import load_app
from ..errors import InvalidInput
from ..output import FitTable, cell
from ..service.logs import LogFormat, configure_logging
from ..service.metrics import ServiceMetrics, serve_metrics
from ..service.scheduler import Scheduler, check_schedulable
from ..service.status import status_report
from ..slots.closed import CLOSED_PERIODS
from .context import Settings, StoreUse, emit_json, global_options, pass_settings

#: Slots named per period in the text of ``status`` before it says how many there are.
_LISTED = 4

__all__ = [
    "check_names", "log_start", "metrics_for", "scheduler", "service_options", "service_store", "status",
    "while_signalled",
]

log = logging.getLogger("vardiya.service")


def service_options(command: Any) -> Any:
    """``--metrics-port`` and ``--log-format``, shared by both services."""
    command = click.option(
        "--log-format", type=click.Choice([f.value for f in LogFormat]), default=LogFormat.TEXT.value,
        show_default=True, help="Logs on stderr as text lines or one JSON object per line.",
    )(command)
    return click.option(
        "--metrics-port", type=int, default=None, metavar="PORT",
        help="Serve Prometheus metrics on this port (/metrics).",
    )(command)


def metrics_for(port: int | None) -> ServiceMetrics | None:
    """A metrics registry served on ``port`` (None: no endpoint, nothing counted); before a store is opened,
    so a bad port writes nothing. ``watch(store)`` adds the store's figures once it is open."""
    if port is None:
        return None
    if not 0 < port < 65536:
        raise InvalidInput(f"--metrics-port {port} is not a port; give a number from 1 to 65535")
    metrics = ServiceMetrics()
    try:
        serve_metrics(metrics, port)
    except OSError as error:
        raise InvalidInput(f"--metrics-port {port} cannot be served ({error.strerror}); pick a free port") from None
    return metrics


@contextlib.contextmanager
def service_store(settings: Settings, log_format: str, metrics_port: int | None) -> Iterator[tuple[Any, ServiceMetrics | None]]:
    """What both services start with: logs configured, the metrics endpoint up (before the store is
    opened, so a bad port writes nothing), then the store, whose figures the endpoint then reports."""
    configure_logging(log_format)
    metrics = metrics_for(metrics_port)
    with settings.open_store(StoreUse.SERVICE) as store:
        if metrics is not None:
            # The app is imported already (the command loaded it): this is the same object.
            metrics.watch(store, load_app(settings.app) if settings.app else None)
        yield store, metrics


def check_names(app: Any, names: tuple[str, ...], option: str) -> None:
    """Each of ``names`` is a handler, slot job, pipeline or periodic function of ``app`` (checked before a
    store is opened)."""
    known = {*app.handlers, *app.slot_jobs, *app.pipelines, *app.periodic}
    for name in names:
        if name not in known:
            raise InvalidInput(
                f"{option} {name!r} is not a handler, slot job, pipeline or periodic function of app {app.name!r}; "
                f"it has: {', '.join(sorted(known)) or 'none'}"
            )


def log_start(service: str, store: Any, app: Any, owner: str, runs: list[str], waits_for: str) -> None:
    """The first log line of a service: which store, which app, what it will run and what it waits for."""
    log.info(
        "%s %s starting: store %s, app %s, %s: %s; waiting for %s",
        service, owner, store.url, app.name, "fires" if service == "scheduler" else "runs",
        ", ".join(runs) or "nothing", waits_for,
        extra={"service": service, "owner": owner, "store": store.url, "app": app.name, "runs": runs},
    )


def while_signalled(stop: Any, work: Any) -> Any:
    """Run ``work()`` with SIGTERM and SIGINT calling ``stop()``; the old handlers come back after.

    ``stop()`` runs in a thread of its own, not in the handler: a handler runs in the main thread
    between two bytecodes, possibly while that thread holds the lock of the very ``threading.Event``
    that ``stop()`` sets (inside ``Event.wait``), and ``Event.set`` would then wait for it forever. A
    scheduler on PostgreSQL was seen hanging on SIGTERM that way.
    """

    def handle(*_: Any) -> None:
        threading.Thread(target=stop, name="vardiya-stop", daemon=True).start()

    previous = {number: signal.signal(number, handle) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        return work()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@click.command()
@global_options
@click.option(
    "--only", "only", multiple=True, metavar="NAME", help="Only this slot job, pipeline or periodic function (repeatable)."
)
@click.option("--poll-max", type=float, default=1.0, show_default=True, help="Longest sleep between steps, seconds.")
@click.option("--lead", type=float, default=1.0, show_default=True, help="Enqueue ticks this many seconds before they are due.")
@click.option("--steps", type=int, default=None, hidden=True, help="Stop after this many steps (for scripts).")
@service_options
@click.option("--json", "as_json", is_flag=True, help="Print the scheduler's report as one JSON document.")
@pass_settings
def scheduler(
    settings: Settings, only: tuple[str, ...], poll_max: float, lead: float, steps: int | None, metrics_port: int | None,
    log_format: str, as_json: bool,
) -> int:
    """Fire the planned ticks of every slot job, periodic function and pipeline trigger, as work items."""
    if poll_max <= 0:
        raise InvalidInput(f"--poll-max must be more than 0 seconds, got {poll_max}")
    if lead < 0:
        raise InvalidInput(f"--lead must be 0 or more seconds, got {lead}")
    app = load_app(settings.app)
    check_schedulable(app, only)
    with service_store(settings, log_format, metrics_port) as (store, metrics):
        running = Scheduler(
            store, app, only=only or None, poll_max=poll_max, lead=timedelta(seconds=lead), metrics=metrics
        )
        log_start(
            "scheduler", store, app, running.owner, [*running.schedules, *(s.name for s in running.sensors)],
            "the next planned time of each" + (" and the sensors' next checks" if running.sensors else ""),
        )
        report = while_signalled(running.stop, lambda: running.run(steps=steps))
    if as_json:
        emit_json(report.to_json())
    else:
        settings.console.print(
            f"scheduler {running.owner}: {report.steps:,} steps, fired {report.fired:,}, passed by {report.skipped:,}"
        )
    return 0


@click.command()
@global_options
@click.option("--late-after", type=float, default=60.0, show_default=True, help="Seconds due before an item counts as late.")
@click.option(
    "--closed-periods", type=int, default=CLOSED_PERIODS, show_default=True, metavar="N",
    help="Look for not-done records in each slot job's latest N periods closed for good.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@pass_settings
def status(settings: Settings, late_after: float, closed_periods: int, as_json: bool) -> int:
    """What is due, late, running, failed, dead and never done; exit 1 when unhealthy, 0 when healthy.

    Unhealthy: an item is late or dead, a job's due ticks are not fired, or a slot job has records
    never done in a period beyond its backlog's reach (--app). The reasons are listed (and in --json
    under ``reasons``), so a health check (``vardiya status || alert``) can say why.
    """
    if late_after < 0:
        raise InvalidInput(f"--late-after must be 0 or more seconds, got {late_after}")
    if closed_periods < 0:
        raise InvalidInput(f"--closed-periods must be 0 or more, got {closed_periods}")
    app = load_app(settings.app) if settings.app else None
    with settings.open_store(StoreUse.EXISTING) as store:
        document = status_report(store, app, late_after=timedelta(seconds=late_after), closed_periods=closed_periods)
    code = 0 if document["healthy"] else 1
    if as_json:
        emit_json(document)
        return code
    console = settings.console
    table = FitTable(title=f"work items ({escape(document['store'])})")
    columns = ["due", "late", "pending", "running", "failed", "dead", "succeeded"]
    table.add_column("family")
    for column in columns:
        table.add_column(column, justify="right")
    for family, counts in sorted(document["items"].items()):
        table.add_row(family, *(str(counts[column]) for column in columns))
    console.print(table)
    if document["jobs"]:
        jobs = FitTable(title="slot jobs (times in UTC)")
        for column in ("job", "next tick", "fired", "passed by", "lateness p50/p99 s", "period", "done", "failed"):
            jobs.add_column(column, justify="left" if column in ("job", "next tick", "period") else "right")
        for job in document["jobs"]:
            p50, p99 = job["lateness_p50_s"], job["lateness_p99_s"]
            jobs.add_row(
                job["job"] + (" (paused)" if job.get("paused") else ""), cell(job["next_tick"]), cell(job["fired"]), cell(job["skipped"]),
                "-" if p50 is None else f"{p50:.3f} / {p99:.3f}", cell(job["period"]), cell(job["done"]),
                cell(job["failed_records"]),
            )
        console.print(jobs)
    for entry in document["pipelines"]:
        states = ", ".join(f"{state} {count}" for state, count in entry["tasks"].items() if count)
        console.print(f"pipeline {entry['pipeline']}: {states or 'no tasks run'}")
        for trigger in entry["triggers"]:
            held = " [yellow]paused[/]" if trigger.get("paused") else ""
            console.print(f"  trigger {trigger['trigger']} ({trigger['describe']}): fired {trigger['fired']}{held}")
    if document["paused"]:
        paused = FitTable(title="paused (vardiya resume NAME; times in UTC)")
        for column in ("kind", "name", "since", "reason"):
            paused.add_column(column)
        for pause in document["paused"]:
            paused.add_row(pause["kind"], escape(pause["name"]), pause["paused_at"], escape(pause["reason"] or "-"))
        console.print(paused)
    if document["services"]:
        running = FitTable(title=f"services ({document['services_alive']} alive; beats in UTC)")
        for column in ("kind", "id", "host", "pid", "app", "started", "last beat", "alive"):
            running.add_column(column, justify="right" if column == "pid" else "left")
        for service in document["services"]:
            running.add_row(
                service["kind"], escape(service["id"]), escape(service["host"]), str(service["pid"]),
                escape(service["app"] or "-"), service["started_at"], service["beat_at"],
                "yes" if service["alive"] else "[red]no[/] (no beat for 3 intervals)",
            )
        console.print(running)
    else:
        console.print("services: no scheduler or worker has beaten in this store")
    if document["behind"]:
        console.print(f"[red]behind[/] (due ticks not fired: is a scheduler running?): {', '.join(document['behind'])}")
    if document["not_done"]:
        lost = FitTable(title="not_done: records never done, in periods beyond the backlog's reach")
        for column in ("job", "period", "not done", "slots", "closed at"):
            lost.add_column(column, justify="right" if column == "not done" else "left")
        for entry in document["not_done"]:
            named = [f"{slot} ({count:,})" for slot, count in entry["slots"].items()]
            slots = ", ".join(named[:_LISTED]) + (f", ... ({len(named)} slots)" if len(named) > _LISTED else "")
            lost.add_row(entry["job"], entry["period"], f"{entry['not_done']:,}", slots, entry["closes_at"])
        console.print(lost)
    if document["sla_missed"]:
        missed = FitTable(title="sla_missed: runs over their sla (UTC)")
        for column in ("family", "name", "missed", "sla s", "last took s", "last", "at"):
            missed.add_column(column, justify="right" if column in ("missed", "sla s", "last took s") else "left")
        for row in document["sla_missed"]:
            missed.add_row(
                row["family"], escape(row["name"]), f"{row['missed']:,}", f"{row['expected_s']:.3f}",
                f"{row['last_took_s']:.3f}", escape(row["last"]), row["last_at"],
            )
        console.print(missed)
    if document["healthy"]:
        console.print("[green]healthy[/]")
    else:
        console.print("[red]UNHEALTHY[/]:")
        for reason in document["reasons"]:
            console.print(f"  - {reason}")
    return code
