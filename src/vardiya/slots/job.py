"""A slot job's declaration: its scheme (and scheme changes), source, handler and tick settings.

Pure: a ``SlotJob`` is a value; running it is ``runner.run_tick``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..clock import ensure_aware
from ..errors import ConfigurationError, InvalidInput
from ..limits import check_name
from ..schedule.catchup import CatchUpPolicy
from .scheme import Period, SlotPosition, SlotScheme

if TYPE_CHECKING:
    from .sources import Source

__all__ = ["RecordResult", "SchemeChange", "SlotJob", "TickContext"]


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordResult:
    """What a handler may report for a record: rows and bytes it produced (both kept in the ledger)."""

    rows: int = 0
    bytes: int = 0


@dataclass(frozen=True, kw_only=True)
class TickContext:
    """What a handler knows about the tick it runs in: never "now", always the planned time.

    ``period`` and ``slot`` are those of the records handed over: the tick's own slot, or with
    ``backfill`` an earlier one the backlog is recovering.
    """

    job: str
    period: Period
    slot: int
    planned_at: datetime
    backfill: bool
    attempt: int


@dataclass(frozen=True, kw_only=True)
class SchemeChange:
    """From the period that starts at ``effective_from`` on, the job uses ``scheme``.

    A change takes effect at a period boundary, so the switch period is planned wholly under the new
    scheme and the ledger (keyed by period) keeps it free of duplicates and gaps.
    """

    effective_from: datetime
    scheme: SlotScheme


def _accepts_context(handler: Callable[..., Any]) -> bool:
    try:
        parameters = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


def _duration(value: timedelta | float | int, what: str) -> timedelta:
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{what} must be a timedelta or a number of seconds, got {value!r}")
    return timedelta(seconds=value)


@dataclass(frozen=True, kw_only=True)
class SlotJob:
    """A periodic job whose records are spread over the slots of a scheme.

    - ``handler(record, context)`` (or ``handler(record)``) runs one record; with ``batch_size`` it
      gets a list of records and may return a mapping record -> ``RecordResult`` or exception. A
      record the mapping leaves out succeeded with nothing to report (as with Lambda's batch item
      failures, only what is named failed); an exception raised by the handler fails the whole batch.
    - ``runs_per_slot`` ticks fire in every slot at ``offsets`` from the window start; every run after
      the first is a compensation run that only sees records that are not done.
    - ``current_limit`` caps the records started for the tick's own slot; ``backfill_limit`` caps the
      backlog after it (earlier slots of the period and of ``catch_up`` earlier periods), oldest first.
    - ``deadline``: no record is started later than this after the tick started; a float in (0, 1]
      is a fraction of the slot window. It counts from the start, not the planned time, so a tick
      that starts late still does its slot's work; what is left goes to the next tick.
    - ``start``: the first period the job covers; the backlog never reaches before it. Without it the
      job's history begins at the first period the ledger has for it.
    - ``max_attempts``: a record that failed this many times in a period is given up for that period
      (it stays ``failed`` in the ledger and in the reports) instead of being retried by every tick.
    - ``downtime``: which ticks ``vardiya scheduler`` fires after no scheduler ran (``CatchUpPolicy``;
      by default the latest missed one, whose backlog then takes the records of the others).
    """

    name: str
    scheme: SlotScheme
    source: Source
    handler: Callable[..., Any]
    runs_per_slot: int = 1
    offsets: tuple[timedelta, ...] = ()
    current_limit: int | None = None
    backfill_limit: int = 1_000
    catch_up: int = 1
    deadline: timedelta | float = 1.0
    max_attempts: int = 3
    batch_size: int | None = None
    scheme_changes: tuple[SchemeChange, ...] = ()
    start: datetime | None = None
    downtime: CatchUpPolicy = field(default_factory=CatchUpPolicy)
    flush_every: int = 500
    handler_takes_context: bool = field(init=False, default=True)

    def __post_init__(self) -> None:
        check_name(self.name, "a slot job name (e.g. 'nightly_users')")
        for label, value, low in (
            ("runs_per_slot", self.runs_per_slot, 1),
            ("backfill_limit", self.backfill_limit, 0),
            ("catch_up", self.catch_up, 0),
            ("max_attempts", self.max_attempts, 1),
            ("flush_every", self.flush_every, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigurationError(f"job {self.name!r}: {label} must be a whole number >= {low}, got {value!r}")
        for label, value in (("current_limit", self.current_limit), ("batch_size", self.batch_size)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigurationError(f"job {self.name!r}: {label} must be a whole number >= 1, got {value!r}")
        offsets = tuple(_duration(o, "an offset") for o in self.offsets) or tuple(
            self.scheme.window_length * i / self.runs_per_slot for i in range(self.runs_per_slot)
        )
        if len(offsets) != self.runs_per_slot:
            raise ConfigurationError(
                f"job {self.name!r}: runs_per_slot={self.runs_per_slot} but {len(offsets)} offsets were given; "
                "give one offset per run, e.g. offsets=[timedelta(minutes=1), timedelta(minutes=31)]"
            )
        for offset in offsets:
            if not timedelta(0) <= offset < self.scheme.window_length:
                raise ConfigurationError(
                    f"job {self.name!r}: offset {offset} is outside the slot window of {self.scheme.window_length}"
                )
        object.__setattr__(self, "offsets", tuple(sorted(offsets)))
        deadline = self.deadline
        if isinstance(deadline, float) and not 0 < deadline <= 1:
            raise ConfigurationError(
                f"job {self.name!r}: a fractional deadline must be in (0, 1] of the slot window, got {deadline}"
            )
        if isinstance(deadline, (timedelta, int)) and _duration(deadline, "deadline") <= timedelta(0):
            raise ConfigurationError(f"job {self.name!r}: deadline must be longer than 0, got {deadline!r}")
        changes = tuple(
            SchemeChange(effective_from=ensure_aware(c.effective_from, "effective_from"), scheme=c.scheme)
            for c in sorted(self.scheme_changes, key=lambda change: change.effective_from)
        )
        for change in changes:
            if (change.scheme.period, change.scheme.tz) != (self.scheme.period, self.scheme.tz):
                raise ConfigurationError(
                    f"job {self.name!r}: a scheme change may change slots, assign or layout but not the "
                    "period or the zone (periods would no longer line up in the ledger)"
                )
            boundary = change.scheme.period_of(change.effective_from)
            if boundary.start != change.effective_from:
                raise ConfigurationError(
                    f"job {self.name!r}: a scheme change takes effect at a period boundary; "
                    f"{change.effective_from.isoformat()} is inside period {boundary.key}, "
                    f"use {boundary.end.isoformat()}"
                )
        object.__setattr__(self, "scheme_changes", changes)
        if self.start is not None:
            object.__setattr__(self, "start", ensure_aware(self.start, f"job {self.name!r} start"))
        if not isinstance(self.downtime, CatchUpPolicy):
            raise ConfigurationError(f"job {self.name!r}: downtime must be a CatchUpPolicy, got {self.downtime!r}")
        object.__setattr__(self, "handler_takes_context", _accepts_context(self.handler))

    def scheme_at(self, moment: datetime) -> SlotScheme:
        """The scheme in force for the period that contains ``moment``."""
        period_start = self.scheme.period_of(moment).start
        chosen = self.scheme
        for change in self.scheme_changes:
            if period_start >= change.effective_from:
                chosen = change.scheme
        return chosen

    def scheme_for(self, period: Period) -> SlotScheme:
        """The scheme in force for ``period``."""
        return self.scheme_at(period.start)

    @property
    def schemes(self) -> Sequence[SlotScheme]:
        """Every scheme the job has used or will use, oldest first."""
        return (self.scheme, *(change.scheme for change in self.scheme_changes))

    def deadline_at(self, position: SlotPosition, started_at: datetime) -> datetime:
        """The instant after which a tick that started at ``started_at`` starts no new record."""
        if isinstance(self.deadline, float):
            return started_at + self.scheme_for(position.period).window_length * self.deadline
        return started_at + _duration(self.deadline, "deadline")

    def call(self, records: Any, context: TickContext) -> Any:
        """Run the handler on one record (or a batch) with or without the context, as it was written."""
        if self.handler_takes_context:
            return self.handler(records, context)
        return self.handler(records)

    def describe(self) -> Mapping[str, Any]:
        """The job's settings, for ``vardiya status`` and the reports."""
        return {
            "name": self.name,
            "scheme": self.scheme.fingerprint,
            "runs_per_slot": self.runs_per_slot,
            "offsets_s": [offset.total_seconds() for offset in self.offsets],
            "current_limit": self.current_limit,
            "backfill_limit": self.backfill_limit,
            "catch_up": self.catch_up,
            "max_attempts": self.max_attempts,
        }
