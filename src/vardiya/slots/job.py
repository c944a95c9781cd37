"""A slot job's declaration: its scheme (and scheme changes), source, handler and tick settings.

Pure: a ``SlotJob`` is a value; running it is ``runner.run_tick``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from ..catchup import CatchUpPolicy
from ..clock import ensure_aware, to_timedelta
from ..errors import ConfigurationError
from ..limits import check_name
from ..sla import check_sla
from .scheme import Period, PlannedTick, SlotPosition, SlotScheme, describe_duration

if TYPE_CHECKING:
    from .sources import Source

__all__ = ["RecordResult", "RunTimes", "SchemeChange", "SlotJob", "TickContext"]


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
    """From the period that starts at ``effective_from`` on, the job uses ``scheme``, run at ``offsets``.

    A change takes effect at a period boundary, so the switch period is planned wholly under the new
    scheme and the ledger (keyed by period) keeps it free of duplicates and gaps. A change may carry
    its own run times: ``runs_per_slot`` and ``offsets`` (from the window start) default to the job's
    (the job's offsets when it gave them, else its runs spread evenly over the new window); giving
    only ``offsets`` sets ``runs_per_slot`` to their number. The seed's 24 slots run at :01 and :31
    becoming 48 half-hour slots run once is ``SchemeChange(effective_from=..., scheme=SlotScheme(
    slots=48), runs_per_slot=1, offsets=[timedelta(minutes=1)])``. ``SlotJob`` checks every change
    when the job is declared: run times outside the new window are refused then, naming the job, the
    change's date and the figure, never later in the scheduler or a replay.
    """

    effective_from: datetime
    scheme: SlotScheme
    runs_per_slot: int | None = None
    offsets: Sequence[timedelta | float | int] | None = None


@dataclass(frozen=True, kw_only=True)
class RunTimes:
    """A scheme in force and when its ticks fire: what the scheduler plans and the reports judge by.

    ``effective_from`` is None for the job's own scheme (in force until its first change).
    """

    scheme: SlotScheme
    runs_per_slot: int
    offsets: tuple[timedelta, ...]
    effective_from: datetime | None = None

    @property
    def tick_interval(self) -> timedelta:
        """How often a slot's ticks fire: the window divided by the runs per slot."""
        return self.scheme.window_length / self.runs_per_slot


def _run_times(
    job: str,
    scheme: SlotScheme,
    runs_per_slot: int | None,
    offsets: Sequence[timedelta | float | int] | None,
    *,
    default: tuple[int, tuple[timedelta, ...] | None],
    effective_from: datetime | None = None,
) -> RunTimes:
    """The checked run times of one scheme of a job; the one rule for the job's scheme and its changes.

    ``default`` is (runs per slot, offsets or None) taken when the caller gives neither: the job's
    own for a change, so a change that only swaps the scheme keeps the job's run times (and is
    refused when they do not fit the new window).
    """
    if effective_from is None:
        where = f"the {scheme.slots}-slot scheme"
    else:
        where = f"the {scheme.slots}-slot scheme from {scheme.period_of(effective_from).key}"
    given = None if offsets is None else tuple(to_timedelta(o, "an offset") for o in offsets)
    if runs_per_slot is None:
        runs_per_slot = len(given) if given else default[0]
        if given is None:
            given = default[1]
    if isinstance(runs_per_slot, bool) or not isinstance(runs_per_slot, int) or runs_per_slot < 1:
        raise ConfigurationError(f"job {job!r}: runs_per_slot of {where} must be a whole number >= 1, got {runs_per_slot!r}")
    window = scheme.window_length
    chosen = given or tuple(window * i / runs_per_slot for i in range(runs_per_slot))
    if len(chosen) != runs_per_slot:
        raise ConfigurationError(
            f"job {job!r}: runs_per_slot={runs_per_slot} but {len(chosen)} offsets were given for {where}; "
            "give one offset per run, e.g. offsets=[timedelta(minutes=1), timedelta(minutes=31)]"
        )
    for offset in chosen:
        if not timedelta(0) <= offset < window:
            raise ConfigurationError(
                f"job {job!r}: offset {describe_duration(offset)} is outside the {describe_duration(window)} slot "
                f"of {where}; give offsets from 0 up to {describe_duration(window)} "
                "(a SchemeChange takes runs_per_slot= and offsets= of its own)"
            )
    return RunTimes(
        scheme=scheme, runs_per_slot=runs_per_slot, offsets=tuple(sorted(chosen)), effective_from=effective_from
    )


def _accepts_context(handler: Callable[..., Any]) -> bool:
    try:
        parameters = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


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
    - ``deadline`` (a ``timedelta``, or whole seconds) or ``deadline_fraction`` (in (0, 1] of the
      slot window; the default is 1.0, the whole window): no record is started later than this after
      the tick started. It counts from the start, not the planned time, so a tick that starts late
      still does its slot's work; what is left goes to the next tick. Give one of the two; a float
      ``deadline`` is refused because it once meant a fraction.
    - ``deadline_grace`` (default 0): nor is any record started after the end of the window of the
      slot the tick was planned for plus this grace, however late the tick started: a late :31 run
      never runs into the next slot's runs. The earlier of the two ends the tick.
    - ``claim_lease`` (default 1 min): a tick claims each chunk of records (``flush_every`` of them)
      for this long before the handler sees them and renews the claim every third of it while the
      chunk runs, so no other run of the slot hands them to a handler at the same time. A run that
      dies stops renewing; once the lease has run out, the next run takes the records.
    - ``start``: the first period the job covers; the backlog never reaches before it. Without it the
      job's history begins at the first period the ledger has for it.
    - ``max_attempts``: a record that failed this many times in a period is given up for that period
      (it stays ``failed`` in the ledger and in the reports) instead of being retried by every tick.
    - ``downtime``: which ticks ``vardiya scheduler`` fires after no scheduler ran (``CatchUpPolicy``;
      by default the latest missed one, whose backlog then takes the records of the others).
    - ``sla``: how long a tick is expected to take; one that takes longer is logged, counted and shown
      by ``vardiya status`` (``vardiya.sla``). Nothing is stopped for it: ``deadline`` does that.
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
    deadline: timedelta | None = None
    deadline_fraction: float | None = None
    max_attempts: int = 3
    batch_size: int | None = None
    scheme_changes: tuple[SchemeChange, ...] = ()
    start: datetime | None = None
    downtime: CatchUpPolicy = field(default_factory=CatchUpPolicy)
    flush_every: int = 500
    deadline_grace: timedelta = timedelta(0)
    claim_lease: timedelta = timedelta(minutes=1)
    sla: timedelta | None = None
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
        for label, limit in (("current_limit", self.current_limit), ("batch_size", self.batch_size)):
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
                raise ConfigurationError(f"job {self.name!r}: {label} must be a whole number >= 1, got {limit!r}")
        explicit = tuple(self.offsets) or None
        own = _run_times(self.name, self.scheme, self.runs_per_slot, explicit, default=(self.runs_per_slot, None))
        object.__setattr__(self, "offsets", own.offsets)
        self._check_deadline()
        grace, lease = to_timedelta(self.deadline_grace, "deadline_grace"), to_timedelta(self.claim_lease, "claim_lease")
        if grace < timedelta(0):
            raise ConfigurationError(f"job {self.name!r}: deadline_grace must not be negative, got {grace}")
        if lease <= timedelta(0):
            raise ConfigurationError(f"job {self.name!r}: claim_lease must be longer than 0, got {lease}")
        object.__setattr__(self, "deadline_grace", grace)
        object.__setattr__(self, "claim_lease", lease)
        object.__setattr__(self, "sla", check_sla(self.sla, f"job {self.name!r}"))
        regimes = [own]
        changes = []
        for given in sorted(self.scheme_changes, key=lambda change: ensure_aware(change.effective_from, "effective_from")):
            change = replace(given, effective_from=ensure_aware(given.effective_from, "effective_from"))
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
            runs = _run_times(
                self.name, change.scheme, change.runs_per_slot, change.offsets,
                default=(self.runs_per_slot, explicit), effective_from=change.effective_from,
            )
            regimes.append(runs)
            changes.append(replace(change, runs_per_slot=runs.runs_per_slot, offsets=runs.offsets))
        object.__setattr__(self, "_regimes", tuple(regimes))
        object.__setattr__(self, "scheme_changes", tuple(changes))
        if self.start is not None:
            object.__setattr__(self, "start", ensure_aware(self.start, f"job {self.name!r} start"))
        if not isinstance(self.downtime, CatchUpPolicy):
            raise ConfigurationError(f"job {self.name!r}: downtime must be a CatchUpPolicy, got {self.downtime!r}")
        object.__setattr__(self, "handler_takes_context", _accepts_context(self.handler))

    def runs_at(self, moment: datetime) -> RunTimes:
        """The scheme in force for the period that contains ``moment``, with its run times."""
        period_start = self.scheme.period_of(moment).start
        regimes: tuple[RunTimes, ...] = self._regimes  # type: ignore[attr-defined]
        chosen = regimes[0]
        for regime in regimes[1:]:
            assert regime.effective_from is not None
            if period_start >= regime.effective_from:
                chosen = regime
        return chosen

    def planned_ticks(self, start: datetime, end: datetime) -> Iterator[PlannedTick]:
        """The planned ticks in [start, end) with their period and slot, each from the scheme in force for
        its period: what the scheduler fires and ``vardiya replay`` runs."""
        boundaries = [ensure_aware(start, "start")]
        boundaries += [c.effective_from for c in self.scheme_changes if start < c.effective_from < end]
        boundaries.append(ensure_aware(end, "end"))
        for low, high in pairwise(boundaries):
            in_force = self.runs_at(low)  # each scheme with its own run times
            yield from in_force.scheme.planned_times(low, high, in_force.offsets)

    def scheme_at(self, moment: datetime) -> SlotScheme:
        """The scheme in force for the period that contains ``moment``."""
        return self.runs_at(moment).scheme

    def scheme_for(self, period: Period) -> SlotScheme:
        """The scheme in force for ``period``."""
        return self.scheme_at(period.start)

    @property
    def schemes(self) -> Sequence[SlotScheme]:
        """Every scheme the job has used or will use, oldest first."""
        return (self.scheme, *(change.scheme for change in self.scheme_changes))

    @property
    def backlog_reach(self) -> int:
        """How many periods before its own a tick's backlog takes records from (-1: none at all).

        The one rule behind both the backlog (``runner``) and "closed for good" (``closes_at``): with
        ``backfill_limit=0`` a tick takes nothing but its own slot; otherwise earlier slots of its own
        period and of ``catch_up`` earlier periods.
        """
        return self.catch_up if self.backfill_limit > 0 else -1

    def backlog_periods(self, period: Period, history_from: datetime | None) -> list[Period]:
        """The earlier periods a tick of ``period`` takes backlog from, oldest first.

        Only from ``history_from`` on (the job's ``start``, else the first period the ledger has for
        it), so a new job does not "recover" periods from before it existed.
        """
        scheme = self.scheme_for(period)
        earlier: list[Period] = []
        cursor = period
        for _ in range(max(0, self.backlog_reach)):
            cursor = scheme.period_after(cursor, -1)
            if history_from is None or cursor.start < history_from:
                break
            earlier.append(cursor)
        return earlier[::-1]

    def closes_at(self, period: Period) -> datetime:
        """The instant from which no tick can take records of ``period`` any more: closed for good.

        It is the end of the last period whose ticks' backlog reaches ``period`` (``backlog_reach``
        periods later; ``period`` itself when the job has no backlog). A tick planned before that
        instant processes its slot and backlog however late it starts, and no record starts after
        its deadline; a tick planned at or after it never touches ``period``. What is not done then
        stays not done unless ``vardiya slots backfill`` runs it.
        """
        last = self.scheme_for(period).period_after(period, max(0, self.backlog_reach))
        return last.end

    def _check_deadline(self) -> None:
        """One deadline, said one way: a duration or a fraction of the slot window, never a guess."""
        deadline, fraction = self.deadline, self.deadline_fraction
        if deadline is not None and fraction is not None:
            raise ConfigurationError(
                f"job {self.name!r}: give deadline (a duration) or deadline_fraction (of the slot window), not both"
            )
        if isinstance(deadline, float):
            raise ConfigurationError(
                f"job {self.name!r}: deadline={deadline!r} is ambiguous; write deadline_fraction={deadline!r} "
                f"for a fraction of the slot window, or deadline=timedelta(seconds={deadline!r}) for a duration"
            )
        if deadline is not None:
            duration = to_timedelta(deadline, f"job {self.name!r}: deadline")
            if duration <= timedelta(0):
                raise ConfigurationError(f"job {self.name!r}: deadline must be longer than 0, got {deadline!r}")
            object.__setattr__(self, "deadline", duration)
        if fraction is not None and (
            isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 < fraction <= 1
        ):
            raise ConfigurationError(
                f"job {self.name!r}: deadline_fraction must be in (0, 1] of the slot window, got {fraction!r}"
            )

    def deadline_at(self, position: SlotPosition, started_at: datetime) -> datetime:
        """The instant after which a tick that started at ``started_at`` starts no new record."""
        if self.deadline is not None:
            return started_at + self.deadline
        fraction = 1.0 if self.deadline_fraction is None else self.deadline_fraction
        return started_at + self.scheme_for(position.period).window_length * fraction

    def window_closes_at(self, position: SlotPosition) -> datetime:
        """The instant after which no tick planned in ``position`` starts a record: its window's end plus the grace."""
        return position.window.end + self.deadline_grace

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
            "deadline_grace_s": self.deadline_grace.total_seconds(),
            "claim_lease_s": self.claim_lease.total_seconds(),
            "scheme_changes": [
                {
                    "effective_from": change.effective_from.isoformat(),
                    "scheme": change.scheme.fingerprint,
                    "runs_per_slot": change.runs_per_slot,
                    "offsets_s": [to_timedelta(offset, "an offset").total_seconds() for offset in change.offsets or ()],
                }
                for change in self.scheme_changes
            ],
        }
