"""The worker: claims async calls, stream batches, ticks and pipeline runs, runs them, records every outcome.

A worker is ``concurrency`` threads, each claiming up to ``prefetch`` items at a time with a lease, and
one heartbeat thread that keeps those leases alive. What it guarantees:

- A worker killed with SIGKILL loses nothing: its heartbeats stop, its leases run out, another worker
  reclaims the items, and the crash counts as an attempt of the items whose handler had started (an
  item that crashes every worker ends dead). Items it had only prefetched go back uncharged: each
  thread marks its items started as it reaches them, a chunk at a time (``pacing.StartPacer``).
- ``stop()`` (SIGTERM in ``vardiya worker``) drains: no new claims, the item in hand is finished, the
  claimed items not yet started are released unattempted, and ``run`` returns.
- Retries belong to the engine: a failed attempt is retried after the handler's wait while attempts
  are left, else the item is dead-lettered with its history, and the ``on_failure`` hook and the
  ``vardiya.worker`` log both say so: an error is never invisible.
- Idle, it waits for work: on PostgreSQL a ``LISTEN`` wakes it the moment something is enqueued or
  appended; on SQLite it reads ``PRAGMA data_version`` every ``poll_min`` and wakes at the first commit
  of another connection (at the latest after ``poll_max``).

Ticks and triggered pipeline runs (``vardiya.service.work``) are claimed one at a time per thread,
before the invocation work: each is long next to a call, and holding a hundred of them would starve
the other workers of the fleet.

The stream consumer lives here too: a worker with nothing to claim cuts waiting stream records into
batches (``Streams.cut``), which any worker then claims like every other item.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..clock import Clock, SystemClock
from ..errors import LeaseLost
from ..store.invocations import CallRow, Invocations
from ..store.records import ItemState, WorkItem
from ..store.streams import Streams, epoch_ms
from .execute import AttemptOutcome, BatchRecord, CallContext, call_single, end_of_attempt, run_attempt
from .gate import StoreGate, storable
from .handlers import CALL_PREFIX, Handler, Model
from .invoker import handlers_of
from .pacing import StartPacer
from .rate_limits import check_queues, claim_limits
from .sla_calls import CallSla
from .wake import Waker, waker_for

if TYPE_CHECKING:
    from ..service.metrics import ServiceMetrics
    from ..service.work import ServiceWork
    from ..store.api import Store

__all__ = ["Worker", "WorkerReport"]

log = logging.getLogger("vardiya.worker")

#: A successful attempt waiting to be recorded, as ``Invocations.complete`` takes it: item id, attempt,
#: handler, the call for the call log (a stream batch's), result, busy ms (an async call's).
Success = tuple[int, int, str, CallRow | None, Any, float | None]


@dataclass
class WorkerReport:
    """What a worker did in one ``run``."""

    items: int = 0
    succeeded: int = 0
    retried: int = 0
    dead: int = 0
    released: int = 0
    lost: int = 0
    calls: int = 0
    records: int = 0
    batches_cut: int = 0
    ticks: int = 0
    pipeline_runs: int = 0
    periodic_runs: int = 0

    def to_json(self) -> dict[str, int]:
        return dict(self.__dict__)


class Worker:
    """Runs the async and stream work of an app's handlers from one store."""

    def __init__(
        self,
        store: Store,
        handlers: Any,
        *,
        concurrency: int = 1,
        lease: float = 30.0,
        prefetch: int = 100,
        owner: str | None = None,
        poll_min: float = 0.01,
        poll_max: float = 0.25,
        heartbeat: bool = True,
        names: Sequence[str] | None = None,
        services: ServiceWork | None = None,
        metrics: ServiceMetrics | None = None,
        queues: Sequence[str] | None = None,
    ) -> None:
        self.store = store
        self.clock: Clock = store.clock
        all_handlers = self.check(handlers, concurrency=concurrency, lease=lease, prefetch=prefetch, names=names)
        self.handlers = all_handlers
        self._by_kind: dict[str, Handler] = {}
        for handler in all_handlers.values():
            self._by_kind[handler.call_kind] = handler.with_model(Model.ASYNC)
            self._by_kind[handler.batch_kind] = handler.with_model(Model.STREAM)
        self.streams = [handler for handler in all_handlers.values() if handler.model is Model.STREAM]
        self.kinds = sorted(self._by_kind)
        # Named queues (None: all) and rate limits go into every claim: rate_limits.limits_of says how.
        self.queues = check_queues(queues)
        self._limits = claim_limits(all_handlers.values())
        if services is None and any(getattr(handlers, name, None) for name in ("slot_jobs", "pipelines", "periodic")):
            from ..service.work import ServiceWork

            services = ServiceWork(store, handlers, metrics=metrics)
        self.services = services if services else None
        self.metrics = metrics
        self.all_kinds = sorted([*self.kinds, *(self.services.kinds if self.services else ())])
        self.concurrency = concurrency
        self.lease = float(lease)
        self.prefetch = prefetch
        self.owner = owner or f"worker-{uuid.uuid4().hex[:12]}"
        self.poll_min = poll_min
        self.poll_max = poll_max
        self._heartbeat = heartbeat
        self._stop = threading.Event()
        self._held: set[int] = set()
        self._held_lock = threading.Lock()
        self._report = WorkerReport()
        self._report_lock = threading.Lock()
        self._invocations = Invocations(store)
        self._streams = Streams(store)
        self._sla = CallSla(store, self.clock)
        self._arrived: tuple[datetime | None, int] = (None, 0)  # the last created_at of a call, in ms
        # A handler without dedup has one gate for all its items: it only serves context.transaction()
        # (a plain store transaction), which needs no item; a handler with dedup gets one per item.
        self._plain_gates = {
            handler.name: StoreGate(store, handler, None)
            for handler in self._by_kind.values()
            if handler.dedup is None
        }

    @staticmethod
    def check(
        handlers: Any, *, concurrency: int, lease: float, prefetch: int, names: Sequence[str] | None
    ) -> dict[str, Handler]:
        """Refuse bad settings (``InvalidInput``) and return the handlers the worker runs: what the
        constructor checks, callable before a store is opened (``vardiya worker`` writes nothing then)."""
        from ..errors import InvalidInput

        for name, value, low in (("concurrency", concurrency, 1), ("prefetch", prefetch, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidInput(f"{name} must be a whole number of at least {low}, got {value!r}")
        if not isinstance(lease, int | float) or lease <= 0:
            raise InvalidInput(f"a lease must be more than 0 seconds, got {lease!r}")
        all_handlers = handlers_of(handlers)
        if names:
            from .invoker import find_handler

            all_handlers = {name: find_handler(all_handlers, name) for name in names}
        return all_handlers

    # -- control ------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Drain: finish the item in hand, release the rest, claim nothing more."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def report(self) -> WorkerReport:
        """What this worker has done so far (live while it runs; a progress display reads it)."""
        return self._report

    def run(self, *, until_idle: bool = False) -> WorkerReport:
        """Work until ``stop()`` (or, with ``until_idle``, until no work of its handlers is left)."""
        beat = None
        if self._heartbeat:
            beat = threading.Thread(target=self._beat, name=f"{self.owner}-heartbeat", daemon=True)
            beat.start()
        try:
            if self.concurrency == 1:
                self._loop(until_idle)
            else:
                threads = [
                    threading.Thread(target=self._loop, args=(until_idle,), name=f"{self.owner}-{n}", daemon=True)
                    for n in range(self.concurrency)
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
        finally:
            self._stop.set()
            if beat is not None:
                beat.join(timeout=5)
        return self._report

    # -- the loop -----------------------------------------------------------------------------------

    def _loop(self, until_idle: bool) -> None:
        waker = waker_for(self.store, self.poll_min, self.poll_max)
        pacer = StartPacer()  # per thread: its chunks follow the handlers it runs
        try:
            while not self._stop.is_set():
                if self.services is not None:
                    served = self.store.items.claim(
                        1, owner=self.owner, lease=self.lease, kinds=self.services.kinds, queues=self.queues
                    )
                    if served:
                        waker.reset()
                        self._serve(served[0])
                        continue
                if self.streams:
                    self._cut(flush=False)
                items = (
                    self.store.items.claim(
                        self.prefetch, owner=self.owner, lease=self.lease, kinds=self.kinds, start=pacer.size,
                        queues=self.queues, limits=self._limits,
                    )
                    if self.kinds else []
                )
                if items:
                    waker.reset()
                    self._work(items, pacer)
                    continue
                if self.streams and self._cut(flush=until_idle):
                    continue
                if until_idle:
                    next_at = self._next_due()
                    if next_at is None:
                        return
                    self._sleep_until(next_at, waker)
                elif self.services is not None:
                    # The scheduler enqueues ticks a moment before they are due: wake when the next is.
                    coming = self._next_service_at()
                    timeout = None if coming is None else max(0.0, (coming - self.clock.now()).total_seconds())
                    waker.wait(self._stop, timeout=timeout)
                else:
                    waker.wait(self._stop)
        finally:
            waker.close()

    def _sleep_until(self, moment: datetime, waker: Waker) -> None:
        delay = (moment - self.clock.now()).total_seconds()
        if delay <= 0:
            delay = self.poll_min
        if isinstance(self.clock, SystemClock):
            waker.wait(self._stop, timeout=min(delay, self.poll_max))
        else:
            self.clock.sleep(delay)  # a virtual clock: time moves to the next due item at once

    def _next_due(self) -> datetime | None:
        """When the next item of ours can be claimed (None: nothing left at all), stream records too."""
        due = self.store.items.next_due(self.all_kinds, self.queues)
        if due is not None:
            # Records still waiting in the stream after a flushing cut are held back by their lane's
            # batch in flight: they become due when that batch does, not before.
            return due
        waiting = bool(self.streams) and Streams(self.store).any_waiting([handler.name for handler in self.streams])
        return self.clock.now() if waiting else None

    def _next_service_at(self) -> datetime | None:
        """When the next tick or pipeline item enqueued ahead of its time comes due (None: none is)."""
        assert self.services is not None
        return self.store.items.next_ready_at(self.services.kinds)

    def _cut(self, *, flush: bool) -> int:
        made = 0
        for handler in self.streams:
            made += self._streams.cut(
                handler.name,
                kind=handler.batch_kind,
                batch_size=handler.batch_size,
                window_s=handler.batch_window,
                max_attempts=handler.retry.max_attempts,
                ordered=handler.ordered,
                lanes=handler.lanes,
                flush=flush,
                queue=handler.queue,
            )
        if made:
            with self._report_lock:
                self._report.batches_cut += made
        return made

    def _beat(self) -> None:
        interval = max(0.05, self.lease / 3)
        while not self._stop.wait(interval):
            with self._held_lock:
                held = sorted(self._held)
            if held:
                try:
                    self.store.items.heartbeat(held, owner=self.owner, lease=self.lease)
                except Exception:  # noqa: BLE001 - a missed beat is retried; the lease has slack
                    log.warning("heartbeat failed for %d item(s)", len(held), exc_info=True)

    # -- ticks and pipeline runs ----------------------------------------------------------------------

    def _serve(self, item: WorkItem) -> None:
        """Run one tick or pipeline item and record how it ended (its lease kept alive meanwhile)."""
        assert self.services is not None
        with self._held_lock:
            self._held.add(item.id)
        try:
            outcome = self.services.run(item)
            if outcome.ok:
                try:
                    self.store.items.complete(item.id, owner=self.owner, result=outcome.result)
                    state = ItemState.SUCCEEDED
                except LeaseLost:
                    state = None
            else:
                try:
                    state = self.store.items.fail(
                        item.id, owner=self.owner, error=outcome.error or "failed", retry_at=outcome.retry_at,
                        traceback=outcome.traceback,
                    )
                except LeaseLost:
                    state = None
        finally:
            with self._held_lock:
                self._held.discard(item.id)
        with self._report_lock:
            report = self._report
            report.items += 1
            if item.kind.startswith("tick:"):
                report.ticks += 1
            elif item.kind.startswith("periodic:"):
                report.periodic_runs += 1
            else:
                report.pipeline_runs += 1
            if state is None:
                report.lost += 1
            elif state is ItemState.SUCCEEDED:
                report.succeeded += 1
            elif state is ItemState.DEAD:
                report.dead += 1
            else:
                report.retried += 1
        if self.metrics is not None:
            self.metrics.item_finished(item.kind, "lost" if state is None else state.value)
        if state is ItemState.DEAD:
            log.error(
                "dead letter: %s item %d (%s) after %d attempt(s): %s",
                item.kind, item.id, item.key, item.attempts, outcome.error,
                extra={"kind": item.kind, "item": item.id, "key": item.key},
            )

    # -- items --------------------------------------------------------------------------------------

    def _work(self, items: list[WorkItem], pacer: StartPacer) -> None:
        """Run claimed items in order; the claim marked the first ``pacer.size`` started, and the rest
        are marked a chunk at a time just before the first of each runs."""
        with self._held_lock:
            self._held.update(item.id for item in items)
        successes: list[Success] = []
        tally = [0, 0, 0]  # items, calls, records: added to the report once per claim, not per item
        contexts: dict[str, CallContext] = {}  # the fast path's contexts, one per handler for the claim
        stop = self._stop
        monotonic = self.clock.monotonic
        chunk_from, marked, marked_at = 0, pacer.size, monotonic()
        index = 0
        try:
            for index, item in enumerate(items):
                if stop.is_set():
                    self._release(items[index:])
                    break
                if index >= marked:
                    now = monotonic()
                    size = pacer.ran(index - chunk_from, now - marked_at)
                    chunk_from, marked, marked_at = index, index + size, now
                    self.store.items.start([later.id for later in items[index:marked]], owner=self.owner)
                handler = self._by_kind[item.kind]
                if item.kind.startswith(CALL_PREFIX):
                    self._call(handler, item, successes, tally, contexts)
                else:
                    self._batch(handler, item, successes, tally)
                if len(successes) >= 100:
                    self._complete(successes)
            else:
                index = len(items)
            pacer.ran(index - chunk_from, monotonic() - marked_at)
        finally:
            if tally[0]:
                with self._report_lock:
                    self._report.items += tally[0]
                    self._report.calls += tally[1]
                    self._report.records += tally[2]
            self._complete(successes)
            self._sla.flush()
            with self._held_lock:
                self._held.difference_update(item.id for item in items)

    def _release(self, items: Sequence[WorkItem]) -> None:
        self.store.items.release([item.id for item in items], owner=self.owner)
        with self._report_lock:
            self._report.released += len(items)

    def _complete(self, successes: list[Success]) -> None:
        if not successes:
            return
        lost = self._invocations.complete(successes, owner=self.owner)
        with self._report_lock:
            self._report.succeeded += len(successes) - len(lost)
            self._report.lost += len(lost)
        successes.clear()

    @staticmethod
    def _count(outcome: AttemptOutcome, tally: list[int]) -> None:
        tally[0] += 1
        tally[1] += len(outcome.calls)
        tally[2] += outcome.processed

    def _call(
        self,
        handler: Handler,
        item: WorkItem,
        successes: list[Success],
        tally: list[int],
        contexts: dict[str, CallContext],
    ) -> None:
        payload = item.payload
        if not isinstance(payload, dict):
            payload = {"record": payload}
        created_at = item.created_at
        arrived = self._arrived  # calls submitted together share their time: convert it once
        if arrived[0] != created_at:
            arrived = self._arrived = (created_at, epoch_ms(created_at))
        record = BatchRecord(item.id, None, payload.get("record"), arrived[1], item.attempts - 1, payload.get("dedup_key"))
        gate = self._plain_gates.get(handler.name)
        if gate is not None and not handler.batch:
            # no dedup, a per-record handler: one call, nothing to admit or settle (execute.call_single)
            context = contexts.get(handler.name)
            if context is None:
                context = contexts[handler.name] = CallContext(handler, self.clock, item.id, gate)
            context.item_id = item.id
            result, busy_ms, failed = call_single(handler, record, clock=self.clock, context=context)
            if handler.sla is not None:
                self._sla.note(handler, item.id, busy_ms)
            tally[0] += 1  # one item, one call, one record
            tally[1] += 1
            tally[2] += 1
            if failed is None:
                # the call is told by its item (its busy time), not by a call-log row (migration 0006)
                successes.append(
                    (item.id, item.attempts, handler.name, None, None if result is None else storable(result), busy_ms)
                )
            else:
                self._fail(handler, item, failed, payload=None)
            return
        outcome = run_attempt(
            handler, [record], clock=self.clock, item_id=item.id, gate=StoreGate(self.store, handler, item.id)
        )
        self._count(outcome, tally)
        self._sla.note_calls(handler, item.id, outcome.calls)
        if outcome.skipped:  # dedup answered with the stored outcome: no call was made
            successes.append((item.id, item.attempts, handler.name, None, outcome.skipped[0][1], None))
            return
        if outcome.done:
            # the call is told by its item (its busy time), not by a call-log row (migration 0006)
            result = outcome.succeeded[0][1]
            successes.append(
                (item.id, item.attempts, handler.name, None, None if result is None else storable(result),
                 outcome.calls[0].busy_ms)
            )
            return
        self._fail(handler, item, outcome, payload=None)

    def _batch(
        self,
        handler: Handler,
        item: WorkItem,
        successes: list[Success],
        tally: list[int],
    ) -> None:
        payload = dict(item.payload)
        # BatchRecord.from_json, inlined: 100,000 records a run of bench_stream
        records = [
            BatchRecord(offset, key, record, arrived_ms, seen, dedup_key)
            for offset, key, record, arrived_ms, seen, dedup_key in payload["records"]
        ]
        gate = self._plain_gates.get(handler.name) or StoreGate(self.store, handler, item.id)
        outcome = run_attempt(handler, records, clock=self.clock, item_id=item.id, gate=gate)
        self._count(outcome, tally)
        self._sla.note_calls(handler, item.id, outcome.calls)
        if outcome.done and len(outcome.calls) <= 1:
            # A finished batch ends like a finished call: many per transaction (one each cost ~40 % of
            # a stream's consumption; benchmarks/README.md, bench_stream).
            call = outcome.calls[0] if outcome.calls else None
            successes.append((item.id, item.attempts, handler.name, call, None, None))
            return
        if outcome.done:
            ok = self._invocations.finish(
                item.id,
                owner=self.owner,
                handler=handler.name,
                attempt=item.attempts,
                state=ItemState.SUCCEEDED,
                calls=outcome.calls,
            )
            with self._report_lock:
                if ok:
                    self._report.succeeded += 1
                else:
                    self._report.lost += 1
            return
        now_ms = epoch_ms(self.clock.now())
        finished = [record for record, _ in outcome.succeeded] + [record for record, _ in outcome.skipped]
        payload["completed"] = list(payload.get("completed", ())) + [[r.arrived_ms, now_ms] for r in finished]
        payload["records"] = [record.to_json() for record in outcome.kept]
        self._fail(handler, item, outcome, payload=payload)

    def _fail(self, handler: Handler, item: WorkItem, outcome: AttemptOutcome, *, payload: Any) -> None:
        error = outcome.summary() or "failed"
        end = end_of_attempt(
            handler, outcome, attempts=item.attempts, max_attempts=item.max_attempts, now=self.clock.now(), key=item.key
        )
        retry, retry_at = end.retry, end.retry_at
        result = None
        if retry:
            state = ItemState.FAILED
        else:
            state = ItemState.DEAD
            result = {"co_failed": end.co_failed, "errors": {str(k): v for k, v in outcome.errors.items()}}
        ok = self._invocations.finish(
            item.id,
            owner=self.owner,
            handler=handler.name,
            attempt=item.attempts,
            state=state,
            calls=outcome.calls,
            payload=payload,
            result=result,
            error=error,
            retry_at=retry_at,
            traceback=outcome.traceback(),
        )
        with self._report_lock:
            if not ok:
                self._report.lost += 1
            elif retry:
                self._report.retried += 1
            else:
                self._report.dead += 1
        if ok and not retry:
            self._dead_lettered(handler, item, error)

    def _dead_lettered(self, handler: Handler, item: WorkItem, error: str) -> None:
        log.error(
            "dead letter: %s item %d (%s) after %d attempt(s): %s",
            handler.name, item.id, item.kind, item.attempts, error,
        )
        if handler.on_failure is not None:
            try:
                handler.on_failure(handler.name, item, error)
            except Exception:  # noqa: BLE001 - a broken hook must not stop the worker
                log.exception("on_failure hook of handler %s raised", handler.name)

