"""The Prometheus endpoint of ``vardiya scheduler`` and ``vardiya worker`` (``--metrics-port``).

Two kinds of figures:

- what this process did, counted as it happens: ticks fired and passed by per job (scheduler); ticks
  run, their start lateness (a histogram), records processed and failed per job, pipeline runs, tick and
  pipeline items finished by outcome (worker; async calls and batches are counted by the store figures);
- what the store holds, read when Prometheus scrapes (a custom collector, one grouped query): work
  items per family (tick, pipeline, call, batch) and state, and how many are due but not started, the
  queue depth to alert on. Dead letters are in it as ``state="dead"``. With the app, per slot job and
  period, the records never done in a period beyond the backlog's reach (``slots.closed``). And the
  runs over their SLA per job, handler and stage (``vardiya_sla_missed_total``, ``store.failures``).

The records never done are a *gauge*, not a counter: the store can recompute them at any time, they fall
to zero when ``vardiya slots backfill`` runs them, and every scheduler and worker reports the same figure
(a counter in each process would count the same records once per process and never go down). They are
recomputed at most once a minute (``NOT_DONE_EVERY``), by the store's clock.

Each process has its own registry, so the endpoint shows vardiya's figures and the process's own
(``process_*``, ``python_*``), nothing a library user registered elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from ..slots.closed import not_done_report

if TYPE_CHECKING:
    from ..app import App
    from ..pipeline.run import RunResult
    from ..slots.runner import TickReport
    from ..store.api import Store
    from .scheduler import StepReport

__all__ = ["ServiceMetrics", "family_of", "serve_metrics"]

_LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


def family_of(kind: str) -> str:
    """``tick``, ``pipeline``, ``call`` or ``batch``: the part of a kind before the colon."""
    return kind.split(":", 1)[0]


class _StoreCollector:
    """Work items per family and state, and the due ones, read from the store at scrape time."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = self.store.clock.now()
        items = GaugeMetricFamily("vardiya_work_items", "Work items in the store, by family and state", labels=["family", "state"])
        due = GaugeMetricFamily(
            "vardiya_work_items_due", "Items ready to run whose run_after has passed (queue depth)", labels=["family"]
        )
        counts: dict[tuple[str, str], int] = {}
        for (kind, state), count in self.store.items.counts_by_kind().items():
            key = (family_of(kind), state.value)
            counts[key] = counts.get(key, 0) + count
        waiting: dict[str, int] = {}
        for kind, count in self.store.items.due_by_kind(now).items():
            waiting[family_of(kind)] = waiting.get(family_of(kind), 0) + count
        for (family, state_name), count in sorted(counts.items()):
            items.add_metric([family, state_name], count)
        for family, count in sorted(waiting.items()):
            due.add_metric([family], count)
        yield items
        yield due


#: The least time between two recomputations of the not-done gauge (one source query per slot and period).
NOT_DONE_EVERY = timedelta(seconds=60)


class _NotDoneCollector:
    """Records never done per slot job and closed period, recomputed at most every ``NOT_DONE_EVERY``."""

    def __init__(self, store: Store, app: App) -> None:
        self.store = store
        self.app = app
        self._taken: tuple[datetime, list[tuple[str, str, int]]] | None = None

    def _figures(self) -> list[tuple[str, str, int]]:
        now = self.store.clock.now()
        if self._taken is not None and now - self._taken[0] < NOT_DONE_EVERY:
            return self._taken[1]
        figures = [
            (name, entry.period, entry.total)
            for name in sorted(self.app.slot_jobs)
            for entry in not_done_report(self.store, self.app.slot_jobs[name], now)
        ]
        self._taken = (now, figures)
        return figures

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily(
            "vardiya_slot_not_done_records",
            "Records never done in a period closed for good (beyond the backlog's reach); vardiya slots backfill runs them",
            labels=["job", "period"],
        )
        for name, period, total in self._figures():
            gauge.add_metric([name, period], total)
        yield gauge


class _SlaCollector:
    """Runs over their SLA per family and name, as the store counts them (``store.failures``).

    Read from the store, like the work items: a tick run by ``vardiya tick`` counts as much as one a
    worker ran, and every process reports the same total (take the max across them, not the sum).
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[CounterMetricFamily]:
        counter = CounterMetricFamily(
            "vardiya_sla_missed",
            "Ticks, handler calls and pipeline tasks that ran longer than their sla, by family and name",
            labels=["family", "name"],
        )
        for row in self.store.failures.sla_report():
            counter.add_metric([row.family.value, row.name], row.missed)
        yield counter


class ServiceMetrics:
    """The counters a scheduler or worker updates, in a registry of its own."""

    def __init__(self, store: Store | None = None) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        if store is not None:
            self.watch(store)
        r = self.registry
        self.fired = Counter("vardiya_scheduler_fired", "Work items the scheduler enqueued", ["schedule"], registry=r)
        self.skipped = Counter(
            "vardiya_scheduler_skipped_ticks", "Missed ticks the catch-up policy passed by", ["schedule"], registry=r
        )
        self.steps = Counter("vardiya_scheduler_steps", "Scheduler steps", registry=r)
        self.ticks = Counter("vardiya_ticks", "Ticks run", ["job"], registry=r)
        self.lateness = Histogram(
            "vardiya_tick_lateness_seconds", "How long after its planned time a tick started", ["job"],
            buckets=_LATENESS_BUCKETS, registry=r,
        )
        self.records = Counter("vardiya_tick_records", "Records a tick processed, by outcome", ["job", "outcome"], registry=r)
        self.deadline = Counter("vardiya_tick_deadline_hits", "Ticks cut short by their deadline or their slot window's end", ["job"], registry=r)
        self.runs = Counter("vardiya_pipeline_runs", "Triggered pipeline runs, by outcome", ["pipeline", "outcome"], registry=r)
        self.items = Counter("vardiya_items_finished", "Items a worker finished, by family and outcome", ["family", "outcome"], registry=r)

    def watch(self, store: Store, app: App | None = None) -> None:
        """Report the store's work items too (read at each scrape), and with ``app`` its slot jobs'
        records never done in closed periods."""
        self.registry.register(_StoreCollector(store))
        self.registry.register(_SlaCollector(store))
        if app is not None and app.slot_jobs:
            self.registry.register(_NotDoneCollector(store, app))

    def scheduler_step(self, report: StepReport) -> None:
        self.steps.inc()
        for firing in report.fired:
            self.fired.labels(firing.schedule).inc()
        for schedule, count in report.skipped.items():
            self.skipped.labels(schedule).inc(count)

    def tick_done(self, job: str, report: TickReport) -> None:
        self.ticks.labels(job).inc()
        self.lateness.labels(job).observe(max(0.0, report.lateness_s))
        self.records.labels(job, "done").inc(report.done)
        self.records.labels(job, "failed").inc(report.failed)
        if report.cut is not None:
            self.deadline.labels(job).inc()

    def pipeline_done(self, pipeline: str, result: RunResult) -> None:
        self.runs.labels(pipeline, "succeeded" if result.ok else "failed").inc()

    def item_finished(self, kind: str, outcome: str, count: int = 1) -> None:
        self.items.labels(family_of(kind), outcome).inc(count)


def serve_metrics(metrics: ServiceMetrics, port: int, address: str = "0.0.0.0") -> Any:
    """Serve ``/metrics`` on ``address:port`` from a daemon thread; returns the server."""
    server, _thread = start_http_server(port, addr=address, registry=metrics.registry)
    return server
