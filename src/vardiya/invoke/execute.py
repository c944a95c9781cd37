"""One attempt at a batch of records: handler calls, the failure policy, dedup, the time limit.

This is the one implementation of the invocation semantics. The worker runs it on the records of a
claimed work item (an async call is a batch of one); ``Invoker.call`` runs it for a sync call; the
planner runs it on a virtual clock with a scripted handler. It touches no store itself: dedup goes
through a ``DedupGate`` and time through the ``Clock`` it is given.

Within one attempt:

- ``retry_batch``: one call on the whole batch. If any record fails, the whole batch is kept for the
  next attempt (and dead-lettered whole after the last one).
- ``report_failures``: one call; only the records that failed are kept.
- ``bisect``: a failing call on two or more records is split in halves and each half is called again,
  at once, recursively; only records that fail alone are kept.

A per-record handler is called on every record of a call even after one fails (a call processes its
whole batch, as a Lambda over an SQS batch does), so "processed" counts every record of every call. A
call that runs past the time limit fails as a whole ("timed out"), whatever it returned.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from ..clock import Clock
from ..errors import InvalidInput
from ..rules.calls import CallOutcome, CallRow
from ..tracebacks import format_traceback
from .batching import bisect
from .handlers import FailurePolicy, Handler, Model

__all__ = [
    "AttemptEnd",
    "AttemptOutcome",
    "BatchRecord",
    "CallContext",
    "CallRecord",
    "DedupGate",
    "call_single",
    "end_of_attempt",
    "run_attempt",
]

_ERROR_TEXT = 2_000


def error_text(error: BaseException) -> str:
    """``Type: message``, one line, bounded: what the history and the dead-letter listing show."""
    message = " ".join(str(error).split())
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text[:_ERROR_TEXT]


@dataclass(slots=True)
class BatchRecord:
    """A record inside a batch: its stream offset, key, payload, and how often it has been processed."""

    offset: int
    key: str | None
    record: Any
    arrived_ms: int
    """When the record arrived (appended or submitted), in ms since the epoch: completion latency."""
    seen: int = 0
    """How many calls have processed the record so far; the current call is number ``seen + 1``."""
    dedup_key: str | None = None

    @property
    def attempt(self) -> int:
        """The number of the processing under way (1 on the first call that sees the record)."""
        return self.seen + 1

    def to_json(self) -> list[Any]:
        return [self.offset, self.key, self.record, self.arrived_ms, self.seen, self.dedup_key]

    @classmethod
    def from_json(cls, values: Sequence[Any]) -> BatchRecord:
        offset, key, record, arrived_ms, seen, dedup_key = values
        return cls(offset, key, record, arrived_ms, seen, dedup_key)  # positional: a third of the time


#: One handler call: what the metrics count (calls, processed records, busy time) and the call log
#: stores; ``outcome`` is ``succeeded``, ``failed`` or ``timed_out``.
CallRecord = CallRow


class DedupGate(Protocol):
    """Dedup as the attempt sees it: which records already ran, and telling which ones did now."""

    def admit(self, records: Sequence[BatchRecord]) -> dict[int, Any]:
        """Take the keys of ``records``; return the duplicates (offset -> stored result): they must not run."""

    def settle(self, succeeded: Sequence[tuple[BatchRecord, Any]], failed: Sequence[BatchRecord]) -> None:
        """Store the outcomes of records that ran (results of the successful ones)."""

    def transaction(self, record: BatchRecord) -> contextlib.AbstractContextManager[Any]:
        """A store transaction in which the record's key is settled as succeeded when it commits."""


class CallContext:
    """What a handler is told about the call it is in."""

    __slots__ = ("_gate", "_settled", "clock", "handler", "item_id", "model", "record")

    def __init__(
        self, handler: Handler, clock: Clock, item_id: int | None, gate: DedupGate | None
    ) -> None:
        self.handler = handler.name
        self.model: Model = handler.model
        self.clock = clock
        self.item_id = item_id
        self.record: BatchRecord | None = None
        self._gate = gate
        self._settled: set[int] = set()

    @property
    def attempt(self) -> int:
        """Which processing of the current record this is (1 the first time)."""
        return self.record.attempt if self.record is not None else 1

    @property
    def key(self) -> str | None:
        """The current record's stream key (or submit key)."""
        return self.record.key if self.record is not None else None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """A transaction on the store that also settles this record's dedup key.

        Write the record's downstream effect through it and the effect and the key commit together:
        a worker killed at any moment can never make the effect happen twice. Without dedup it is a
        plain store transaction.
        """
        if self._gate is None or self.record is None:
            raise InvalidInput(
                f"handler {self.handler!r}: context.transaction() needs a store-backed invocation "
                "(async or stream through a worker, or sync through an Invoker with a store)"
            )
        with self._gate.transaction(self.record) as connection:
            yield connection
        self._settled.add(self.record.offset)


@dataclass(slots=True)
class AttemptOutcome:
    """What one attempt at a batch did."""

    calls: list[CallRecord] = field(default_factory=list)
    succeeded: list[tuple[BatchRecord, Any]] = field(default_factory=list)
    """Records finished in this attempt, with their results."""
    skipped: list[tuple[BatchRecord, Any]] = field(default_factory=list)
    """Duplicates, with their stored results: their key had already succeeded, the handler did not run."""
    kept: list[BatchRecord] = field(default_factory=list)
    """Records to retry (or dead-letter): the whole batch under ``retry_batch``."""
    errors: dict[int, str] = field(default_factory=dict)
    """offset -> error of every record that failed in its last call."""
    exceptions: dict[int, BaseException] = field(default_factory=dict)
    """offset -> the exception itself (what a sync caller gets raised)."""

    @property
    def processed(self) -> int:
        return sum(call.records for call in self.calls)

    @property
    def done(self) -> bool:
        return not self.kept

    @property
    def co_failed(self) -> int:
        """Healthy records among those kept: what ``retry_batch`` dead-letters besides the bad ones."""
        return sum(1 for record in self.kept if record.offset not in self.errors)

    def summary(self) -> str | None:
        """One line for the history: how many failed, and the first error."""
        if not self.errors:
            return None
        first = next(iter(self.errors.values()))
        if len(self.errors) == 1 and len(self.kept) <= 1:
            return first
        return f"{len(self.errors)} of {len(self.kept) + len(self.succeeded)} record(s) failed; first: {first}"

    def traceback(self) -> str | None:
        """The traceback of the first failed record's exception (the error ``summary`` names), bounded;
        None when no record raised (a call over its time limit, a record the handler reported failed)."""
        for offset in self.errors:
            raised = self.exceptions.get(offset)
            if raised is not None:
                return format_traceback(raised)
        return None


@dataclass(frozen=True, slots=True)
class AttemptEnd:
    """Where an item goes after an attempt that left records to do: a retry at a time, or dead."""

    retry: bool
    retry_at: datetime | None
    co_failed: int


def end_of_attempt(
    handler: Handler, outcome: AttemptOutcome, *, attempts: int, max_attempts: int, now: datetime, key: str
) -> AttemptEnd:
    """After a failed attempt (``attempts`` made so far): retry after the handler's wait while attempts
    are left, else dead, with the healthy records that go down with the bad ones counted."""
    if attempts < max_attempts:
        wait = handler.retry.wait_after(attempts, key)
        return AttemptEnd(retry=True, retry_at=now + timedelta(seconds=wait), co_failed=0)
    return AttemptEnd(retry=False, retry_at=None, co_failed=outcome.co_failed)


def _call(
    handler: Handler,
    part: Sequence[BatchRecord],
    clock: Clock,
    context: CallContext,
    raised: dict[int, BaseException],
) -> tuple[CallRecord, dict[int, str], dict[int, Any]]:
    """Call the handler once on ``part``; return the call, the errors by offset, the results by offset.

    The exceptions themselves go into ``raised``.
    """
    started_at = clock.now()
    began = clock.monotonic()
    errors: dict[int, str] = {}
    results: dict[int, Any] = {}
    blocked: set[int] = set()
    if handler.batch:
        context.record = part[0] if len(part) == 1 else None
        try:
            reported = handler.fn(list(part), context)
        except Exception as error:  # noqa: BLE001 - a handler's failure is data, recorded per record
            text = error_text(error)
            errors = {record.offset: text for record in part}
            raised.update((record.offset, error) for record in part)
        else:
            offsets = {record.offset for record in part}
            for item in reported or ():
                offset = item.offset if isinstance(item, BatchRecord) else item
                if offset not in offsets:
                    raise InvalidInput(
                        f"handler {handler.name!r} reported failed offset {offset!r}, which is not in its "
                        "batch; return the offsets (or BatchRecords) of the batch's own records"
                    )
                errors[offset] = "reported as failed by the handler"
    else:
        fn = handler.fn
        # Order per key: once a record of a key fails, the records behind it with the same key are
        # not run in this call (they wait for it, whatever the policy), so a key never goes out of order.
        failed_keys: set[str] = set()
        for record in part:
            if handler.ordered and record.key is not None and record.key in failed_keys:
                errors[record.offset] = f"blocked: an earlier record of key {record.key!r} failed in this call"
                blocked.add(record.offset)
                continue
            context.record = record
            try:
                results[record.offset] = fn(record.record, context)
            except Exception as error:  # noqa: BLE001 - as above
                errors[record.offset] = error_text(error)
                raised[record.offset] = error
                if record.key is not None:
                    failed_keys.add(record.key)
    for record in part:
        if record.offset not in blocked:
            record.seen += 1
    busy_s = clock.monotonic() - began
    ended_at = clock.now()
    outcome = CallOutcome.FAILED if errors else CallOutcome.SUCCEEDED
    if busy_s > handler.time_limit_s:
        text = f"timed out: the call took {busy_s:.3f} s, over the {handler.time_limit_s:g} s limit"
        errors = {record.offset: text for record in part}
        outcome = CallOutcome.TIMED_OUT
    first_error = next(iter(errors.values())) if errors else None
    call = CallRecord(
        started_at=started_at,
        ended_at=ended_at,
        busy_ms=busy_s * 1000.0,
        records=len(part) - len(blocked),
        failed=len(errors),
        outcome=outcome,
        error=first_error,
    )
    return call, errors, results


def run_attempt(
    handler: Handler,
    records: Sequence[BatchRecord],
    *,
    clock: Clock,
    item_id: int | None = None,
    gate: DedupGate | None = None,
    on_call: Callable[[CallRecord], None] | None = None,
) -> AttemptOutcome:
    """Make one attempt at ``records`` under the handler's failure policy; see the module docstring."""
    outcome = AttemptOutcome()
    if not records:
        return outcome
    duplicates = gate.admit(records) if gate is not None else {}
    pending = [record for record in records if record.offset not in duplicates]
    outcome.skipped = [(record, duplicates[record.offset]) for record in records if record.offset in duplicates]
    if not pending:
        return outcome
    context = CallContext(handler, clock, item_id, gate)
    policy = handler.policy if handler.model is Model.STREAM else FailurePolicy.REPORT_FAILURES
    failed: list[BatchRecord] = []

    def call(part: Sequence[BatchRecord]) -> None:
        made, errors, results = _call(handler, part, clock, context, outcome.exceptions)
        outcome.calls.append(made)
        if on_call is not None:
            on_call(made)
        if errors:
            good = [(record, results.get(record.offset)) for record in part if record.offset not in errors]
            bad = [record for record in part if record.offset in errors]
        else:
            good = [(record, results.get(record.offset)) for record in part]
            bad = []
        if gate is not None:
            # a record whose effect committed through context.transaction() keeps its key as settled
            # there, even if the handler raised afterwards: running it again would repeat the effect
            settled = context._settled
            gate.settle(
                [pair for pair in good if pair[0].offset not in settled],
                [record for record in bad if record.offset not in settled],
            )
            settled.clear()
        if errors:
            for record in part:
                if record.offset in errors:
                    outcome.errors[record.offset] = errors[record.offset]
                else:
                    outcome.errors.pop(record.offset, None)
        elif outcome.errors:  # a bisected half that now succeeds clears what its records failed with
            for record in part:
                outcome.errors.pop(record.offset, None)
        if not bad:
            outcome.succeeded.extend(good)
            return
        if policy is FailurePolicy.BISECT and len(part) > 1:
            first, second = bisect(part)
            call(first)
            call(second)
            return
        outcome.succeeded.extend(good)
        failed.extend(bad)

    call(pending)
    if failed and policy is FailurePolicy.RETRY_BATCH:
        # the batch is never split: every record of it, healthy or not, comes back together
        outcome.kept = list(records)
        outcome.succeeded = []
        outcome.skipped = []
    elif failed:
        order = {record.offset: index for index, record in enumerate(records)}
        outcome.kept = sorted(failed, key=lambda record: order[record.offset])
    return outcome


def call_single(
    handler: Handler, record: BatchRecord, *, clock: Clock, context: CallContext
) -> tuple[Any, float, AttemptOutcome | None]:
    """``run_attempt`` on one record of a per-record handler whose gate never dedups, made lean.

    The worker's path for an async call without dedup (what most calls are): with a single record the
    failure policies agree (nothing to split, nothing healthy to keep back) and no record can be blocked
    by its key, so the attempt is one handler call, timed and checked against the limit as ``_call``
    does. Returns ``(result, busy_ms, None)`` when the call succeeded in time: a successful async call
    is told by its item and busy time (migration 0006), so nothing more is built for it. Otherwise
    ``(None, busy_ms, outcome)``, the outcome ``run_attempt`` would have given. ``context`` may be
    reused between calls (its ``item_id`` set by the caller); its record is set here.
    """
    context.record = record
    monotonic = clock.monotonic
    began = monotonic()
    try:
        result = handler.fn(record.record, context)
    except Exception as raised:  # noqa: BLE001 - a handler's failure is data, recorded per record
        busy_s = monotonic() - began
        record.seen += 1
        return None, busy_s * 1000.0, _single_failure(record, clock.now(), busy_s, error_text(raised), raised)
    busy_s = monotonic() - began
    record.seen += 1
    if context._settled:
        context._settled.clear()
    if busy_s > handler.time_limit_s:
        error = f"timed out: the call took {busy_s:.3f} s, over the {handler.time_limit_s:g} s limit"
        return None, busy_s * 1000.0, _single_failure(record, clock.now(), busy_s, error, None, timed_out=True)
    return result, busy_s * 1000.0, None


def _single_failure(
    record: BatchRecord,
    ended_at: datetime,
    busy_s: float,
    error: str,
    raised: BaseException | None,
    *,
    timed_out: bool = False,
) -> AttemptOutcome:
    """The outcome of one failed (or overlong) call of one record, as ``run_attempt`` records it."""
    outcome = AttemptOutcome()
    if raised is not None:
        outcome.exceptions[record.offset] = raised
    outcome.calls.append(
        CallRecord(
            started_at=ended_at - timedelta(seconds=busy_s),
            ended_at=ended_at,
            busy_ms=busy_s * 1000.0,
            records=1,
            failed=1,
            outcome=CallOutcome.TIMED_OUT if timed_out else CallOutcome.FAILED,
            error=error,
        )
    )
    outcome.errors[record.offset] = error
    outcome.kept.append(record)
    return outcome
