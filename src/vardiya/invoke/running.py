"""Running claimed invocation work: async calls and stream batches, each outcome recorded.

What it guarantees (the worker's promises for invocation work):

- Items it had only prefetched go back uncharged: the claim marked the first chunk started, and the
  runner marks the rest a chunk at a time just before the first of each runs (``pacing.StartPacer``),
  so a SIGKILL charges an attempt only to the items whose handler had started.
- A drain (``stop``) finishes the item in hand and releases the claimed items not yet started.
- Retries belong to the engine: a failed attempt is retried after the handler's wait while attempts
  are left, else the item is dead-lettered with its history, and the ``on_failure`` hook and the
  ``vardiya.worker`` log both say so: an error is never invisible.
- Successes are recorded many per transaction (``Invocations.complete``): one transaction each cost
  about 40 % of a stream's consumption (benchmarks/README.md, bench_stream).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..clock import Clock
from ..store.invocations import CallRow, Invocations
from ..store.records import ItemState, WorkItem
from ..store.streams import epoch_ms
from .execute import (
    AttemptOutcome,
    BatchRecord,
    CallContext,
    call_single,
    end_of_attempt,
    run_attempt,
)
from .gate import StoreGate, storable
from .handlers import CALL_PREFIX, Handler
from .heartbeat import LeaseHeartbeat
from .pacing import StartPacer
from .report import WorkerReport
from .sla_calls import CallSla

if TYPE_CHECKING:
    from ..store.api import Store

__all__ = ["HandlerRunner", "Success"]

log = logging.getLogger("vardiya.worker")

#: A successful attempt waiting to be recorded, as ``Invocations.complete`` takes it: item id, attempt,
#: handler, the call for the call log (a stream batch's), result, busy ms (an async call's).
Success = tuple[int, int, str, CallRow | None, Any, float | None]

#: Successes recorded in one transaction at most.
_COMPLETE_EVERY = 100
#: The longest a success waits to be recorded (seconds of the worker's clock, from the start of its
#: call): fast calls share a transaction a hundred at a time, a slow call's item is succeeded (its
#: result readable, its lease let go) as soon as it ends, not after the claim's hundredth call; a worker
#: that dies loses at most this much finished work to a re-run.
_COMPLETE_AFTER_S = 0.05


class HandlerRunner:
    """Runs claimed call and batch items with their handlers; shared by the worker's threads."""

    def __init__(
        self,
        store: Store,
        handlers: Mapping[str, Handler],
        *,
        owner: str,
        clock: Clock,
        report: WorkerReport,
        heartbeat: LeaseHeartbeat,
        stop: threading.Event,
    ) -> None:
        self.store = store
        #: the handler of each item kind (a handler's call kind and its batch kind)
        self.by_kind = dict(handlers)
        self.owner = owner
        self.clock = clock
        self.report = report
        self.heartbeat = heartbeat
        self.stop = stop
        self._invocations = Invocations(store)
        self._sla = CallSla(store, clock)
        self._arrived: tuple[datetime | None, int] = (None, 0)  # the last created_at of a call, in ms
        # A handler without dedup has one gate for all its items: it only serves context.transaction()
        # (a plain store transaction), which needs no item; a handler with dedup gets one per item.
        self._plain_gates = {
            handler.name: StoreGate(store, handler, None) for handler in self.by_kind.values() if handler.dedup is None
        }

    def run(self, items: list[WorkItem], pacer: StartPacer) -> None:
        """Run claimed items in order; the claim marked the first ``pacer.size`` started, and the rest
        are marked a chunk at a time just before the first of each runs."""
        self.heartbeat.hold(item.id for item in items)
        successes: list[Success] = []
        tally = [0, 0, 0]  # items, calls, records: added to the report once per claim, not per item
        contexts: dict[str, CallContext] = {}  # the fast path's contexts, one per handler for the claim
        stop = self.stop
        monotonic = self.clock.monotonic
        chunk_from, marked, marked_at = 0, pacer.size, monotonic()
        record_by = 0.0  # when the oldest success waiting in ``successes`` is to be recorded at the latest
        index = 0
        try:
            for index, item in enumerate(items):
                if stop.is_set():
                    self.release(items[index:])
                    break
                if index >= marked:
                    now = monotonic()
                    size = pacer.ran(index - chunk_from, now - marked_at)
                    chunk_from, marked, marked_at = index, index + size, now
                    self.store.items.start([later.id for later in items[index:marked]], owner=self.owner)
                if not successes:
                    record_by = monotonic() + _COMPLETE_AFTER_S
                handler = self.by_kind[item.kind]
                if item.kind.startswith(CALL_PREFIX):
                    self._call(handler, item, successes, tally, contexts)
                else:
                    self._batch(handler, item, successes, tally)
                if successes and (len(successes) >= _COMPLETE_EVERY or monotonic() >= record_by):
                    self._complete(successes)
            else:
                index = len(items)
            pacer.ran(index - chunk_from, monotonic() - marked_at)
        finally:
            if tally[0]:
                self.report.add(items=tally[0], calls=tally[1], records=tally[2])
            self._complete(successes)
            self._sla.flush()
            self.heartbeat.drop(item.id for item in items)

    def release(self, items: Sequence[WorkItem]) -> None:
        """Give claimed items back unattempted (a drain)."""
        self.store.items.release([item.id for item in items], owner=self.owner)
        self.report.add(released=len(items))

    def _complete(self, successes: list[Success]) -> None:
        if not successes:
            return
        lost = self._invocations.complete(successes, owner=self.owner)
        self.report.add(succeeded=len(successes) - len(lost), lost=len(lost))
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
                # the call is told by its item (its busy time), not by a call-log row
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
            # the call is told by its item (its busy time), not by a call-log row
            result = outcome.succeeded[0][1]
            successes.append(
                (item.id, item.attempts, handler.name, None, None if result is None else storable(result),
                 outcome.calls[0].busy_ms)
            )
            return
        self._fail(handler, item, outcome, payload=None)

    def _batch(self, handler: Handler, item: WorkItem, successes: list[Success], tally: list[int]) -> None:
        payload = dict(item.payload)
        # BatchRecord.from_json, inlined: the hot loop of a stream's consumption
        records = [
            BatchRecord(offset, key, record, arrived_ms, seen, dedup_key)
            for offset, key, record, arrived_ms, seen, dedup_key in payload["records"]
        ]
        gate = self._plain_gates.get(handler.name) or StoreGate(self.store, handler, item.id)
        outcome = run_attempt(handler, records, clock=self.clock, item_id=item.id, gate=gate)
        self._count(outcome, tally)
        self._sla.note_calls(handler, item.id, outcome.calls)
        if outcome.done and len(outcome.calls) <= 1:
            # A finished batch ends like a finished call: many per transaction.
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
            self.report.add(**({"succeeded": 1} if ok else {"lost": 1}))
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
        if not ok:
            self.report.add(lost=1)
        elif retry:
            self.report.add(retried=1)
        else:
            self.report.add(dead=1)
            self._dead_lettered(handler, item, error)

    @staticmethod
    def _dead_lettered(handler: Handler, item: WorkItem, error: str) -> None:
        log.error(
            "dead letter: %s item %d (%s) after %d attempt(s): %s",
            handler.name, item.id, item.kind, item.attempts, error,
        )
        if handler.on_failure is not None:
            try:
                handler.on_failure(handler.name, item, error)
            except Exception:
                log.exception("on_failure hook of handler %s raised", handler.name)
