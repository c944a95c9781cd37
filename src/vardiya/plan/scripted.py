"""The scripted handler a replay runs: outcomes from the workload, durations on the virtual clock.

It is an ordinary batch handler (``Handler(batch=True)``): it gets the records of a call and returns
the offsets of those that failed, as a ``report_failures`` handler does. A record fails when its
outcome says so (``poison`` always, ``transient`` on its first processing, ``BatchRecord.attempt``),
and the call lasts the per-call overhead plus each record's time, which it spends by sleeping on the
call's clock. ``run_attempt`` measures that as the call's busy time and applies the time limit, as
it does for any handler. The same function runs in a real worker just as well (the contract tests do
that), since it touches nothing but its clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..invoke.execute import BatchRecord, CallContext
from ..invoke.handlers import Dedup, FailurePolicy, Handler, Model
from .profile import Profile
from .workload import Outcome, Workload

__all__ = ["ScriptedHandler", "handler_for", "record_key"]


def record_key(record: Any) -> str:
    """A replayed record's dedup key: its id, as text."""
    return str(record["id"])


class ScriptedHandler:
    """Plays a workload: which records fail on which processing, and how long every call takes."""

    def __init__(self, workload: Workload, profile: Profile) -> None:
        self.overhead_s = profile.per_call_overhead_ms / 1000.0
        default_s = profile.per_record_ms / 1000.0
        self._poison: set[int | str] = set()
        self._transient: set[int | str] = set()
        self._durations: dict[int | str, float] = {}
        for entry in workload.records:
            if entry.outcome is Outcome.POISON:
                self._poison.add(entry.record)
            elif entry.outcome is Outcome.TRANSIENT:
                self._transient.add(entry.record)
            self._durations[entry.record] = default_s if entry.duration_ms is None else entry.duration_ms / 1000.0

    def __call__(self, batch: Sequence[BatchRecord], context: CallContext) -> list[int]:
        durations, poison, transient = self._durations, self._poison, self._transient
        elapsed = self.overhead_s
        failed: list[int] = []
        for entry in batch:
            record = entry.record["id"]
            elapsed += durations[record]
            if record in poison or (record in transient and entry.attempt == 1):
                failed.append(entry.offset)
        context.clock.sleep(elapsed)
        return failed


def handler_for(
    fn: Any,
    profile: Profile,
    *,
    model: Model,
    batch_size: int = 1,
    policy: FailurePolicy = FailurePolicy.RETRY_BATCH,
    dedup: bool = False,
    name: str = "plan",
) -> Handler:
    """The handler a replay (or a real run it is checked against) uses for ``fn`` under a profile.

    It carries no per-record worst case: a batch size too large for the time limit is not refused here
    but replayed, so that its calls time out as they would, and the plan marks it.
    """
    return Handler(
        name=name,
        fn=fn,
        model=model,
        batch=True,
        retry=profile.retry,
        caller_retry=profile.caller_retry,
        batch_size=batch_size,
        policy=policy,
        time_limit_s=profile.time_limit_s,
        dedup=Dedup(window=profile.dedup.window_s, key=record_key) if dedup else None,
    )
