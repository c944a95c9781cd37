"""What a worker does with the items the scheduler fires: run a tick, a triggered pipeline, a periodic function.

A tick item carries its planned time; the worker runs ``run_tick`` for exactly that time, so the
tick processes the slot it was planned for however late it starts, and its report (with the lateness
of its start) becomes the item's result. Records that fail are the ledger's business (compensation
runs retry them); the item fails only when the tick itself could not run (its source raised, the
store was unreachable), and is then retried with back-off like any item.

A pipeline item names the trigger and the partition; the worker runs that partition's tasks of the
trigger's stages with ``run_pipeline`` (which plans the upstream tasks they need and skips what is
done), recording the trigger and planned time with the run, which is what ``vardiya pipeline
triggers`` reports. A run with failed or blocked tasks fails its item: the retry runs only what is not
done, and after the pipeline's ``max_attempts`` the item is a dead letter.

A periodic item names the function and its planned time; the worker calls the function (with that
time when it takes an argument) and its return value becomes the item's result. An exception fails
the attempt, retried with the ticks' back-off until the function's ``max_attempts``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..invoke.execute import error_text
from ..invoke.gate import storable
from ..pipeline.run import run_pipeline
from ..schedule.periodic import PERIODIC_PREFIX, periodic_kind
from ..schedule.plan import PIPELINE_PREFIX, TICK_PREFIX, pipeline_kind, tick_kind
from ..slots.runner import run_tick
from ..store.records import WorkItem
from ..tracebacks import format_traceback

if TYPE_CHECKING:
    from ..app import App
    from ..store.api import Store
    from .metrics import ServiceMetrics

__all__ = ["ServiceOutcome", "ServiceWork"]

log = logging.getLogger("vardiya.worker")
#: The longest wait before a failed tick is tried again.
_TICK_RETRY_CAP_S = 60.0


@dataclass(frozen=True)
class ServiceOutcome:
    """How an item ended: succeeded with ``result``, or failed with ``error`` (retried at ``retry_at``)."""

    ok: bool
    result: Any = None
    error: str | None = None
    retry_at: datetime | None = None
    #: the traceback of the exception that failed it, bounded (``vardiya.tracebacks``)
    traceback: str | None = None


class ServiceWork:
    """Runs the tick, pipeline and periodic items of one app."""

    def __init__(self, store: Store, app: App, *, metrics: ServiceMetrics | None = None) -> None:
        self.store = store
        self.app = app
        self.metrics = metrics
        self.kinds = sorted(
            [tick_kind(name) for name in app.slot_jobs] + [pipeline_kind(name) for name in app.pipelines]
            + [periodic_kind(name) for name in app.periodic]
        )

    def __bool__(self) -> bool:
        return bool(self.kinds)

    def run(self, item: WorkItem) -> ServiceOutcome:
        if item.kind.startswith(TICK_PREFIX):
            return self._tick(item)
        if item.kind.startswith(PIPELINE_PREFIX):
            return self._pipeline(item)
        if item.kind.startswith(PERIODIC_PREFIX):
            return self._periodic(item)
        raise ConfigurationError(
            f"work item {item.id} of kind {item.kind!r} is not a tick, a pipeline run or a periodic function's"
        )

    def _retry_at(self, wait_s: float) -> datetime:
        return self.store.clock.now() + timedelta(seconds=wait_s)

    def _tick(self, item: WorkItem) -> ServiceOutcome:
        payload = item.payload
        job = self.app.get_slot_job(payload["job"])
        planned = datetime.fromisoformat(payload["planned_at"])
        try:
            report = run_tick(self.store, job, planned)
        except Exception as error:  # noqa: BLE001 - the tick could not run: the item is retried
            wait = min(_TICK_RETRY_CAP_S, 2.0 ** item.attempts)
            log.error("tick %s %s could not run: %s", job.name, item.key, error, extra={"job": job.name, "key": item.key})
            return ServiceOutcome(
                False, error=error_text(error), retry_at=self._retry_at(wait), traceback=format_traceback(error)
            )
        result = report.to_json()
        result["attempt"] = item.attempts
        log.info(
            "tick %s period %s slot %d: %d started, %d backlog, %d held, %d done, %d failed, cut %s, "
            "started %.3f s after its planned time",
            job.name, report.period, report.slot, report.started, report.backlog, report.held, report.done,
            report.failed, result["cut"], report.lateness_s,
            extra={
                "job": job.name, "period": report.period, "slot": report.slot, "planned_at": result["planned_at"],
                "lateness_s": report.lateness_s, "started": report.started, "backlog": report.backlog,
                "held": report.held, "done": report.done, "failed": report.failed, "cut": result["cut"],
            },
        )
        if self.metrics is not None:
            self.metrics.tick_done(job.name, report)
        return ServiceOutcome(True, result=result)

    def _periodic(self, item: WorkItem) -> ServiceOutcome:
        periodic = self.app.get_periodic(item.payload["periodic"])
        planned = datetime.fromisoformat(item.payload["planned_at"])
        try:
            result = periodic.call(planned)
        except Exception as error:  # noqa: BLE001 - the user's function failed: the item is retried
            wait = min(_TICK_RETRY_CAP_S, 2.0 ** item.attempts)
            log.error(
                "periodic %s (planned %s) failed: %s", periodic.name, planned.isoformat(), error,
                extra={"periodic": periodic.name, "key": item.key},
            )
            return ServiceOutcome(False, error=error_text(error), retry_at=self._retry_at(wait))
        late = (self.store.clock.now() - planned).total_seconds()
        log.info(
            "periodic %s (planned %s) done, started %.3f s after its planned time", periodic.name,
            planned.isoformat(), late, extra={"periodic": periodic.name, "key": item.key, "lateness_s": late},
        )
        return ServiceOutcome(True, result=None if result is None else storable(result))

    def _pipeline(self, item: WorkItem) -> ServiceOutcome:
        payload = item.payload
        entry = self.app.get_pipeline(payload["pipeline"])
        trigger = entry.trigger(payload["trigger"])
        partition = payload.get("partition")
        tasks = entry.tasks_for(trigger, partition)
        started_by = {
            "trigger": trigger.name, "trigger_kind": trigger.kind, "planned_at": payload.get("planned_at"),
            "partition": partition, "item": item.id, "attempt": item.attempts,
        }
        try:
            result = run_pipeline(
                self.store, entry.graph, root=entry.root, tasks=tasks, concurrency=entry.concurrency,
                strict=entry.strict, started_by=started_by,
            )
        except Exception as error:  # noqa: BLE001 - e.g. an upstream that is not done: retried later
            log.error("pipeline %s (%s) could not run: %s", entry.name, trigger.name, error, extra={"pipeline": entry.name})
            return ServiceOutcome(
                False, error=error_text(error), retry_at=self._retry_at(entry.retry_wait_s),
                traceback=format_traceback(error),
            )
        document = result.to_json()
        log.info(
            "pipeline %s run %d (trigger %s, partition %s): %d ran, %d failed, %d blocked, %d skipped",
            entry.name, result.run_id, trigger.name, partition, len(result.ran), len(result.failed),
            len(result.blocked), len(result.skipped),
            extra={"pipeline": entry.name, "run_id": result.run_id, "trigger": trigger.name, "partition": partition},
        )
        if self.metrics is not None:
            self.metrics.pipeline_done(entry.name, result)
        if result.failed or result.blocked or result.pending:
            failed = ", ".join(result.failed) or "none"
            summary = f"run {result.run_id}: failed {failed}; {len(result.blocked)} blocked"
            return ServiceOutcome(False, result=document, error=summary, retry_at=self._retry_at(entry.retry_wait_s))
        return ServiceOutcome(True, result=document)
