"""Serving ticks, pipeline runs and periodic functions inside a worker: run, record, count.

``ServiceWork`` knows how to run each kind of item; this collaborator is the worker's side of it: it
keeps the item's lease alive while it runs (a pipeline run can take minutes), records the outcome
(completed, or failed with the retry time ``ServiceWork`` chose), counts it in the worker's report and
metrics, and logs a dead letter. It is what the engine's claim loop is given as its ``ServedItems``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import LeaseLost
from ..invoke.heartbeat import LeaseHeartbeat
from ..invoke.report import WorkerReport
from ..schedule.periodic import PERIODIC_PREFIX
from ..schedule.plan import TICK_PREFIX
from ..store.records import ItemState, WorkItem
from .work import ServiceWork

if TYPE_CHECKING:
    from ..store.api import Store
    from .metrics import ServiceMetrics

__all__ = ["ServiceItemRunner"]

log = logging.getLogger("vardiya.worker")


class ServiceItemRunner:
    """Runs one claimed tick, pipeline or periodic item at a time and records how it ended."""

    def __init__(
        self,
        store: Store,
        work: ServiceWork,
        *,
        owner: str,
        report: WorkerReport,
        heartbeat: LeaseHeartbeat,
        metrics: ServiceMetrics | None = None,
    ) -> None:
        self.store = store
        self.work = work
        self.owner = owner
        self.report = report
        self.heartbeat = heartbeat
        self.metrics = metrics

    @property
    def kinds(self) -> Sequence[str]:
        return self.work.kinds

    def serve(self, item: WorkItem) -> None:
        """Run one tick or pipeline item and record how it ended (its lease kept alive meanwhile)."""
        with self.heartbeat.holding([item.id]):
            outcome = self.work.run(item)
            state: ItemState | None
            try:
                if outcome.ok:
                    self.store.items.complete(item.id, owner=self.owner, result=outcome.result)
                    state = ItemState.SUCCEEDED
                else:
                    state = self.store.items.fail(
                        item.id, owner=self.owner, error=outcome.error or "failed", retry_at=outcome.retry_at,
                        traceback=outcome.traceback,
                    )
            except LeaseLost:
                state = None
        self._count(item, state)
        if self.metrics is not None:
            self.metrics.item_finished(item.kind, "lost" if state is None else state.value)
        if state is ItemState.DEAD:
            log.error(
                "dead letter: %s item %d (%s) after %d attempt(s): %s",
                item.kind, item.id, item.key, item.attempts, outcome.error,
                extra={"kind": item.kind, "item": item.id, "key": item.key},
            )

    def _count(self, item: WorkItem, state: ItemState | None) -> None:
        if item.kind.startswith(TICK_PREFIX):
            what = "ticks"
        elif item.kind.startswith(PERIODIC_PREFIX):
            what = "periodic_runs"
        else:
            what = "pipeline_runs"
        if state is None:
            how = "lost"
        elif state is ItemState.SUCCEEDED:
            how = "succeeded"
        elif state is ItemState.DEAD:
            how = "dead"
        else:
            how = "retried"
        self.report.add(items=1, **{what: 1, how: 1})
