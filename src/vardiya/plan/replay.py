"""The replay: a workload through the invocation engine on virtual time, one model at a time.

A discrete-event replay. Records arrive at the profile's rate; what happens to them is decided by the
engine's own code, never by a formula here:

- every attempt is ``run_attempt`` (handler calls, failure policy, bisect, reported failures, dedup
  through a ``DedupGate``, the time limit), with the scripted handler spending each call's time on
  the replay's ``VirtualClock``, so the attempt measures its own busy time;
- after a failed attempt, ``end_of_attempt`` says retry at a time or dead (async and stream), and the
  caller's ``CallerRetry.delay_after`` says call again or give up (sync);
- stream batches are cut from the arrivals by ``batch_ready``, the rule ``Streams.cut`` applies;
- dedup keys follow ``is_duplicate`` (``MemoryKeys``).

What the replay adds is only time and place. A sync call starts when its record arrives; an async
call or a stream record is accepted after ``accept_ms`` (the caller's whole wait), and an async call
is ready then; a batch is ready when it is cut. With unbounded concurrency every item starts when it
is ready (a serverless platform scaling out); with ``concurrency = N`` it starts at the later of that
and the moment the first of N workers is free. A record's completion runs from its arrival to its
final outcome: success, the caller's error (sync) or the dead letter. Items are attempted in the
order they start, so an attempt sees the dedup keys of every attempt that started before it.

``Prepared`` holds what the replays of one workload under one profile share (the scripted handler,
payloads, arrival times), so that a sweep or a comparison makes it once.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..clock import VirtualClock
from ..errors import InvalidInput
from ..invoke.execute import BatchRecord, end_of_attempt, run_attempt
from ..invoke.handlers import FailurePolicy, Handler, Model
from ..invoke.metrics import Metrics, percentile
from ..rules.batching import batch_ready
from ..rules.calls import CallOutcome
from ..store.records import ItemState
from .gate import MemoryKeys
from .profile import Profile
from .scripted import ScriptedHandler, handler_for, record_key
from .workload import Workload

__all__ = ["ORIGIN", "PlanRow", "Prepared", "Replay", "check_batch_size", "model_of", "policy_of", "replay"]

#: The moment a replay starts (any fixed moment will do: only durations are reported).
ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)


def model_of(value: Model | str) -> Model:
    """An invocation model from its name, or a one-line error listing the known ones."""
    try:
        return Model(value)
    except ValueError:
        known = ", ".join(member.value for member in Model)
        raise InvalidInput(f"unknown invocation model {value!r}; choose one of: {known}") from None


def policy_of(value: FailurePolicy | str) -> FailurePolicy:
    """A failure policy from its name, or a one-line error listing the known ones."""
    try:
        return FailurePolicy(value)
    except ValueError:
        known = ", ".join(member.value for member in FailurePolicy)
        raise InvalidInput(f"unknown failure policy {value!r}; choose one of: {known}") from None


def check_batch_size(batch_size: object, what: str = "batch size") -> int:
    """A batch size as a whole number of at least 1, or a one-line error."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInput(f"{what} must be a whole number of at least 1, got {batch_size!r}")
    return batch_size


@dataclass(frozen=True, kw_only=True)
class PlanRow:
    """The figures of one replay: the metrics of a real run, plus what the plan was."""

    model: Model
    batch_size: int | None
    """The stream's batch size (None for sync and async)."""
    policy: FailurePolicy | None
    """The stream's failure policy (None for sync and async)."""
    dedup: bool
    metrics: Metrics
    batch_ms: float
    """How long one call on a full batch takes under the profile (a batch of one for sync and async)."""
    dedup_ms: float
    """The dedup store's share of ``busy_ms``."""
    timed_out: int
    """Calls that ran past the time limit."""

    @property
    def cost(self) -> float:
        return self.metrics.cost

    @property
    def busy_ms(self) -> float:
        return self.metrics.busy_ms

    @property
    def fits_limit(self) -> bool:
        return self.metrics.fits_limit

    def to_json(self, *, with_batch_ms: bool = False) -> dict[str, Any]:
        """The JSON of ``plan invocation`` (``with_batch_ms``: a row of ``plan batch-sweep``)."""
        m = self.metrics
        document: dict[str, Any] = {
            "model": self.model.value,
            "batch_size": self.batch_size,
            "policy": self.policy.value if self.policy else None,
            "calls": m.calls,
            "processed": m.processed,
            "extra": m.extra,
            "dead_letter": m.dead_letter,
            "co_failed": m.co_failed,
            "caller_wait_ms": round(m.caller_wait_ms or 0.0, 3),
            "completion_mean_ms": round(m.completion_mean_ms, 3),
            "completion_p99_ms": round(m.completion_p99_ms, 3),
            "busy_ms": round(m.busy_ms, 3),
            "cost": round(m.cost, 6),
            "fits_limit": m.fits_limit,
        }
        if with_batch_ms:
            document["batch_ms"] = round(self.batch_ms, 3)
        document |= {
            "unique": m.unique,
            "caller_errors": m.caller_errors,
            "timed_out_calls": self.timed_out,
            "dedup": self.dedup,
            "dedup_ms": round(self.dedup_ms, 3),
        }
        return document


@dataclass(frozen=True, kw_only=True, eq=False)
class Prepared:
    """What every replay of one workload under one profile shares, made once (a sweep makes 11 replays).

    The scripted handler, each record's payload and dedup key, and its arrival and append times; a
    record's index in these tuples is its offset (offsets start at 1, index 0 is unused).
    """

    workload: Workload
    profile: Profile
    fn: ScriptedHandler
    payloads: tuple[dict[str, Any], ...]
    dedup_keys: tuple[str | None, ...]
    arrival: tuple[float, ...]
    """Seconds from the start of the replay; record i (from 0) arrives at i / rate."""
    appended: tuple[float, ...]
    """When an async call or a stream record is stored: its arrival plus the accept time."""
    appended_at: tuple[datetime, ...]
    arrived_ms: tuple[int, ...]

    @classmethod
    def of(cls, workload: Workload, profile: Profile) -> Prepared:
        rate = profile.arrival_rate_per_s
        accept_s = profile.accept_ms / 1000.0
        payloads: list[dict[str, Any]] = [{}]
        arrival = [0.0]
        for index, entry in enumerate(workload.records):
            payloads.append({"id": entry.record})
            arrival.append(index / rate)
        appended = [moment + accept_s for moment in arrival]
        return cls(
            workload=workload,
            profile=profile,
            fn=ScriptedHandler(workload, profile),
            payloads=tuple(payloads),
            dedup_keys=(None, *(record_key(payload) for payload in payloads[1:])),
            arrival=tuple(arrival),
            appended=tuple(appended),
            appended_at=tuple(ORIGIN + timedelta(seconds=moment) for moment in appended),
            arrived_ms=tuple(round(moment * 1000) for moment in arrival),
        )

    def check(self, workload: Workload, profile: Profile) -> None:
        if workload is not self.workload or profile is not self.profile:
            raise InvalidInput("a prepared replay belongs to one workload and one profile; prepare it again for others")


class _Item:
    """A work item (an async call or a stream batch), or a sync call, as the replay moves it."""

    __slots__ = ("attempts", "id", "key", "records")

    def __init__(self, item_id: int, key: str, records: list[BatchRecord]) -> None:
        self.id = item_id
        self.key = key
        self.records = records
        self.attempts = 0


class Replay:
    """One handler, one model, one workload, on one virtual clock; ``run`` replays the arrivals."""

    def __init__(
        self,
        workload: Workload,
        profile: Profile,
        *,
        model: Model | str,
        batch_size: int | None = None,
        policy: FailurePolicy | str | None = None,
        dedup: bool = False,
        retain_dead_keys: bool = True,
        prepared: Prepared | None = None,
    ) -> None:
        if prepared is None:
            prepared = Prepared.of(workload, profile)
        prepared.check(workload, profile)
        self.prepared = prepared
        self.workload = workload
        self.profile = profile
        self.model = model_of(model)
        self.stream = self.model is Model.STREAM
        size = check_batch_size(profile.batch_size if batch_size is None else batch_size)
        self.batch_size = size if self.stream else None
        self.policy = policy_of(profile.policy if policy is None else policy) if self.stream else None
        self.handler: Handler = handler_for(
            prepared.fn,
            profile,
            model=self.model,
            batch_size=size if self.stream else 1,
            policy=self.policy or FailurePolicy.RETRY_BATCH,
            dedup=dedup,
        )
        self.clock = VirtualClock(ORIGIN)
        self.keys = (
            MemoryKeys(
                clock=self.clock,
                window_s=profile.dedup.window_s,
                read_ms=profile.dedup.read_ms,
                write_ms=profile.dedup.write_ms,
                retain_dead=retain_dead_keys,
            )
            if dedup
            else None
        )
        self._lanes: list[float] | None = [0.0] * profile.concurrency if profile.concurrency else None
        self._heap: list[tuple[float, int, _Item]] = []
        self._sequence = 0
        self._next_item = 0
        self._arrival = prepared.arrival
        self.calls = self.processed = self.failed_calls = self.timed_out = 0
        self.busy_ms = 0.0
        self.dead_letter = self.co_failed = self.caller_errors = 0
        self.completions: list[float] = []
        """Every record's completion (ms): for a sync call also the caller's wait."""
        self.dead: list[tuple[float, _Item, int]] = []
        """Items dead now, with the moment (replay seconds) each died and its co-failed records."""

    # -- arrivals -----------------------------------------------------------------------------------

    def run(self) -> Replay:
        """Replay every record's arrival and everything it leads to; returns self."""
        prepared = self.prepared
        keys = prepared.dedup_keys if self.handler.dedup is not None else (None,) * len(prepared.payloads)
        arrived_ms = prepared.arrived_ms
        records = [
            BatchRecord(offset, None, prepared.payloads[offset], arrived_ms[offset], 0, keys[offset])
            for offset in range(1, len(prepared.payloads))
        ]
        if self.model is Model.STREAM:
            self._cut(records)
        else:
            ready = prepared.arrival if self.model is Model.SYNC else prepared.appended
            for record in records:
                self._push(ready[record.offset], self._item(f"call-{record.offset}", [record]))
        self._drain()
        return self

    def _item(self, key: str, records: list[BatchRecord]) -> _Item:
        self._next_item += 1
        if self.keys is not None:
            self.keys.states[self._next_item] = ItemState.PENDING
        return _Item(self._next_item, key, records)

    def _push(self, ready: float, item: _Item) -> None:
        self._sequence += 1
        heapq.heappush(self._heap, (ready, self._sequence, item))

    def _cut(self, records: Sequence[BatchRecord]) -> None:
        """Cut the stream into batches as ``Streams.cut`` would, deciding by ``batch_ready``."""
        size = self.handler.batch_size
        window = self.profile.batch_window_s
        appended, appended_at = self.prepared.appended, self.prepared.appended_at
        # No window: a partial batch waits for the last arrival, which flushes it. A window longer
        # than the whole arrival span says exactly that to batch_ready.
        window_s = window if window is not None else appended[-1] - appended[1] + 1.0
        waiting: list[BatchRecord] = []
        oldest = 0.0
        oldest_at = ORIGIN
        last = records[-1].offset

        def cut(at: float) -> None:
            self._push(at, self._item(f"0:{waiting[0].offset}", list(waiting)))
            waiting.clear()

        for record in records:
            offset = record.offset
            now = appended[offset]
            if waiting and window is not None and oldest + window <= now:
                # the window ran out before this record arrived: the waiting records went without it
                expired_at = oldest_at + timedelta(seconds=window)
                if batch_ready(len(waiting), size, oldest_at, expired_at, window_s):
                    cut(oldest + window)
            if not waiting:
                oldest, oldest_at = now, appended_at[offset]
            waiting.append(record)
            if batch_ready(len(waiting), size, oldest_at, appended_at[offset], window_s, flush=offset == last):
                cut(now)

    # -- attempts -----------------------------------------------------------------------------------

    def _drain(self) -> None:
        heap, clock, handler, keys, lanes = self._heap, self.clock, self.handler, self.keys, self._lanes
        arrival, completions = self._arrival, self.completions
        sync = self.model is Model.SYNC
        call_model = self.model is Model.ASYNC
        max_attempts = handler.retry.max_attempts
        calls = processed = failed_calls = timed_out = 0
        busy_ms = 0.0
        while heap:
            ready, _, item = heapq.heappop(heap)
            start = ready if lanes is None or lanes[0] <= ready else lanes[0]
            clock.set(ORIGIN + timedelta(seconds=start))
            began = clock.monotonic()
            item.attempts += 1
            if call_model:
                item.records[0].seen = item.attempts - 1  # as the worker rebuilds a call's record
            item_id = None if sync else item.id
            if keys is not None and item_id is not None:
                keys.states[item_id] = ItemState.RUNNING
            outcome = run_attempt(
                handler, item.records, clock=clock, item_id=item_id,
                gate=keys.for_item(item_id) if keys is not None else None,
            )
            end = start + (clock.monotonic() - began)
            if lanes is not None:
                heapq.heapreplace(lanes, end)
            for call in outcome.calls:
                calls += 1
                processed += call.records
                busy_ms += call.busy_ms
                if call.outcome is not CallOutcome.SUCCEEDED:
                    failed_calls += 1
                    timed_out += call.outcome is CallOutcome.TIMED_OUT
            # a record's completion: from its arrival to its final outcome, here the end of this attempt
            for record, _ in outcome.succeeded:
                completions.append((end - arrival[record.offset]) * 1000.0)
            for record, _ in outcome.skipped:
                completions.append((end - arrival[record.offset]) * 1000.0)
            if outcome.done:
                if keys is not None and item_id is not None:
                    keys.states[item_id] = ItemState.SUCCEEDED
                continue
            if sync:
                delay = handler.caller_retry.delay_after(item.attempts)
                if delay is None:
                    self.caller_errors += 1
                    completions.append((end - arrival[item.records[0].offset]) * 1000.0)
                else:
                    self._push(end + delay, item)
                continue
            decision = end_of_attempt(
                handler, outcome, attempts=item.attempts, max_attempts=max_attempts, now=clock.now(), key=item.key
            )
            item.records = outcome.kept
            if decision.retry:
                assert decision.retry_at is not None
                if keys is not None:
                    keys.states[item.id] = ItemState.FAILED
                self._push((decision.retry_at - ORIGIN).total_seconds(), item)
                continue
            if keys is not None:
                keys.states[item.id] = ItemState.DEAD
            self.dead_letter += len(outcome.kept)
            self.co_failed += decision.co_failed
            for record in outcome.kept:
                completions.append((end - arrival[record.offset]) * 1000.0)
            self.dead.append((end, item, decision.co_failed))
        self.calls += calls
        self.processed += processed
        self.failed_calls += failed_calls
        self.timed_out += timed_out
        self.busy_ms += busy_ms

    # -- redrive ------------------------------------------------------------------------------------

    def redrive(self, after_s: float, *, retain: bool = True) -> list[int]:
        """Redrive every dead item ``after_s`` seconds after it died, and replay what follows.

        ``retain``: vardiya's redrive, the same item made ready again (its keys, kept alive while it was
        dead, get a fresh window); otherwise the usual design's, a new message, its keys long gone once
        the window has passed. Returns the ids of the items redriven.
        """
        dead, self.dead = self.dead, []
        redriven = []
        for died, item, co_failed in dead:
            # as in the store, the figures count what is dead now: a redriven item is no longer
            self.dead_letter -= len(item.records)
            self.co_failed -= co_failed
            at = died + after_s
            if not retain:
                item = self._item(item.key, item.records)
            elif self.keys is not None:
                self.clock.set(ORIGIN + timedelta(seconds=at))
                self.keys.redrive(item.id)
                self.keys.states[item.id] = ItemState.PENDING
            item.attempts = 0
            redriven.append(item.id)
            self._push(at, item)
        self._drain()
        return redriven

    # -- figures ------------------------------------------------------------------------------------

    @property
    def dedup_ms(self) -> float:
        return self.keys.dedup_ms if self.keys is not None else 0.0

    def row(self) -> PlanRow:
        """The figures so far, as the metrics of a run."""
        profile = self.profile
        batch = self.batch_size or 1
        busy = self.busy_ms + self.dedup_ms
        completions = self.completions
        mean = sum(completions) / len(completions) if completions else 0.0
        # sync: the caller waits for the final outcome, its retries included; async and stream: the accept
        wait = mean if self.model is Model.SYNC else profile.accept_ms
        metrics = Metrics(
            handler=self.handler.name,
            model=self.model.value,
            calls=self.calls,
            processed=self.processed,
            unique=len(self.workload),
            dead_letter=self.dead_letter,
            co_failed=self.co_failed,
            caller_wait_ms=wait,
            completion_mean_ms=mean,
            completion_p99_ms=percentile(completions, 0.99),
            busy_ms=busy,
            cost=profile.prices.cost(self.calls, busy),
            fits_limit=self.timed_out == 0 and profile.fits(batch),
            failed_calls=self.failed_calls,
            caller_errors=self.caller_errors,
        )
        return PlanRow(
            model=self.model,
            batch_size=self.batch_size,
            policy=self.policy,
            dedup=self.keys is not None,
            metrics=metrics,
            batch_ms=profile.batch_ms(batch),
            dedup_ms=self.dedup_ms,
            timed_out=self.timed_out,
        )


def replay(
    workload: Workload,
    profile: Profile,
    *,
    model: Model | str,
    batch_size: int | None = None,
    policy: FailurePolicy | str | None = None,
    dedup: bool = False,
    prepared: Prepared | None = None,
) -> PlanRow:
    """Replay ``workload`` under one model (the stream at ``batch_size`` under ``policy``; the profile's
    when not given) and return its figures. ``prepared``: shared with other replays of the same two."""
    return Replay(
        workload, profile, model=model, batch_size=batch_size, policy=policy, dedup=dedup, prepared=prepared
    ).run().row()
