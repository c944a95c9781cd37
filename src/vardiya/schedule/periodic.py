"""Periodic functions: "run this every 5 minutes" without slots, records or a pipeline. Pure.

    @app.every(timedelta(minutes=5))
    def refresh_rates(planned_at): ...

    @app.cron("*/5 * * * *", tz="Europe/Istanbul")
    def send_digest(): ...

A periodic function is a time schedule like a slot job's ticks: ``vardiya scheduler`` plans its times,
lets its ``CatchUpPolicy`` decide after downtime, and enqueues one work item per planned time, keyed by
that time (``periodic:NAME`` / ``2026-12-01T10:05:00.000000Z``), so it is one item however many
schedulers fire it; ``vardiya worker`` runs it. An interval's times are multiples of ``every`` counted
from ``anchor`` (the Unix epoch by default), so every scheduler computes the same times without asking
anyone; a cron expression's times are those of ``Cron`` (cronsim, DST handled as cronie does).

The function takes no argument, or one: the planned time (aware, in the periodic's zone), never "now",
so a late run still knows which time it is for. What it returns becomes the item's result.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from ..catchup import CatchUpPolicy
from ..errors import ConfigurationError
from ..limits import check_name
from ..slots.scheme import describe_duration
from .plan import SERVICE_ATTEMPTS, Firing, planned_key, utc
from .triggers import Cron, check_zone

__all__ = ["PERIODIC_PREFIX", "Periodic", "PeriodicSchedule", "periodic_kind"]

PERIODIC_PREFIX = "periodic:"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TINY = timedelta(microseconds=1)


def periodic_kind(name: str) -> str:
    """The work-item kind of periodic function ``name``."""
    return f"{PERIODIC_PREFIX}{name}"


def _arity(fn: Callable[..., Any], name: str) -> int:
    """How many positional arguments ``fn`` is called with: 0, or 1 (the planned time)."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: called as it is
        return 0
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    empty = inspect.Parameter.empty
    required = [p for p in parameters if p.default is empty and p.kind in positional]
    required_keywords = [p for p in parameters if p.default is empty and p.kind is inspect.Parameter.KEYWORD_ONLY]
    if len(required) > 1 or required_keywords:
        raise ConfigurationError(
            f"periodic function {name!r} takes {len(required) + len(required_keywords)} required arguments; "
            "give it none, or one (the planned time), e.g. def refresh(planned_at): ..."
        )
    takes = any(p.kind in positional or p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    return 1 if takes else 0


@dataclass(frozen=True, kw_only=True)
class Periodic:
    """A function run at planned times: every ``every`` from ``anchor``, or at the times of ``cron`` in ``tz``."""

    name: str
    fn: Callable[..., Any]
    every: timedelta | None = None
    cron: str | None = None
    tz: str = "UTC"
    anchor: datetime = EPOCH
    downtime: CatchUpPolicy = field(default_factory=CatchUpPolicy)
    max_attempts: int = SERVICE_ATTEMPTS
    arity: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        check_name(self.name, "a periodic function name")
        what = f"periodic function {self.name!r}"
        if not callable(self.fn):
            raise ConfigurationError(f"{what}: fn must be callable, got {self.fn!r}")
        if (self.every is None) == (self.cron is None):
            raise ConfigurationError(f"{what}: give exactly one of every=timedelta(...) or cron='*/5 * * * *'")
        check_zone(self.tz, what)
        if self.every is not None and (not isinstance(self.every, timedelta) or self.every < timedelta(seconds=1)):
            raise ConfigurationError(
                f"{what}: every must be a timedelta of at least 1 second, e.g. timedelta(minutes=5); got {self.every!r}"
            )
        if self.cron is not None:
            Cron(expr=self.cron, tz=self.tz)  # the same check, and the same message, as a pipeline's Cron
        if not isinstance(self.anchor, datetime) or self.anchor.tzinfo is None:
            raise ConfigurationError(f"{what}: anchor must be a timezone-aware datetime, got {self.anchor!r}")
        if not isinstance(self.downtime, CatchUpPolicy):
            raise ConfigurationError(f"{what}: downtime must be a CatchUpPolicy, got {self.downtime!r}")
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ConfigurationError(f"{what}: max_attempts must be a whole number of at least 1, got {attempts!r}")
        object.__setattr__(self, "arity", _arity(self.fn, self.name))

    @property
    def kind(self) -> str:
        return periodic_kind(self.name)

    def describe(self) -> str:
        """The schedule in words, as ``vardiya app show`` prints it."""
        if self.every is not None:
            every = f"every {describe_duration(self.every)}"
            return every + ("" if self.anchor == EPOCH else f" from {self.anchor.isoformat()}")
        return f"cron {self.cron!r} in {self.tz}"

    def times(self, after: datetime, through: datetime) -> Iterator[datetime]:
        """Planned times in (after, through], ascending, in UTC."""
        if self.cron is not None:
            yield from Cron(expr=self.cron, tz=self.tz).times(after, through)
            return
        assert self.every is not None
        step = self.every
        anchor = utc(self.anchor)
        count = max(0, (utc(after) - anchor) // step + 1)
        planned = anchor + step * count
        while planned <= after:
            planned += step
        while planned <= through:
            yield planned
            planned += step

    def call(self, planned: datetime) -> Any:
        """Run the function for ``planned`` (given in the periodic's zone when it takes an argument)."""
        if self.arity == 1:
            return self.fn(planned.astimezone(ZoneInfo(self.tz)))
        return self.fn()


class PeriodicSchedule:
    """The scheduler's view of a periodic function (a ``TimeSchedule``)."""

    def __init__(self, periodic: Periodic) -> None:
        self.periodic = periodic
        self.name = periodic.kind
        self.kind = periodic.kind
        self.policy: CatchUpPolicy = periodic.downtime

    def origin(self, now: datetime) -> datetime:
        # Never run: the latest time before now is the one the policy may fire (max_ticks), as a new
        # slot job fires its current tick; anything earlier was never meant to run.
        span = self.periodic.every or timedelta(days=1)
        return max(utc(now) - span, utc(self.periodic.anchor) - _TINY)

    def times(self, after: datetime, through: datetime) -> list[datetime]:
        return list(self.periodic.times(after, through))

    def next_after(self, moment: datetime) -> datetime | None:
        return next(self.periodic.times(moment, moment + timedelta(days=400)), None)

    def firing(self, planned: datetime) -> Firing:
        return Firing(
            self.name, self.kind, planned_key(planned),
            {"periodic": self.periodic.name, "planned_at": utc(planned).isoformat()}, utc(planned),
            self.periodic.max_attempts,
        )
