"""SLAs: how long a slot job's tick, a handler's call or a pipeline stage's task is expected to take.

A declared ``sla=timedelta(...)`` is a promise to the operator, not a limit: nothing is stopped when
a run goes over it (``deadline`` and ``time_limit_s`` do that). A run over it is logged as a warning
that names it and both durations, counted in the store (``store.failures.sla_missed``), shown by
``vardiya status`` and exported by the services as ``vardiya_sla_missed_total{family,name}``.
Durations are the timer's (the real cost, also in a replay on a virtual clock).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from .errors import ConfigurationError

__all__ = ["check_sla", "describe_miss", "log_miss", "over_sla"]

log = logging.getLogger("vardiya.sla")


def check_sla(value: object, owner: str) -> timedelta | None:
    """``value`` as a positive timedelta (a number is seconds), or None; ``owner`` names who declared it."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (timedelta, int, float)):
        raise ConfigurationError(f"{owner}: sla must be a timedelta (e.g. timedelta(minutes=5)), got {value!r}")
    sla = value if isinstance(value, timedelta) else timedelta(seconds=value)
    if sla <= timedelta(0):
        raise ConfigurationError(f"{owner}: sla must be longer than 0, got {sla}")
    return sla


def over_sla(sla: timedelta | None, took_s: float) -> bool:
    """Whether a run that took ``took_s`` seconds went over ``sla`` (never, without one)."""
    return sla is not None and took_s > sla.total_seconds()


def _seconds(value: float) -> str:
    return f"{value:.3f} s" if value < 60 else f"{value / 60:.1f} min"


def describe_miss(family: str, name: str, ref: str, took_s: float, sla: timedelta) -> str:
    """The warning line of one miss: who, which run, how long it took and its SLA."""
    return f"sla missed: {family} {name} ({ref}) took {_seconds(took_s)}, over its sla of {_seconds(sla.total_seconds())}"


def log_miss(family: str, name: str, ref: str, took_s: float, sla: timedelta) -> None:
    """Log one miss as a warning (structured fields for the JSON log)."""
    log.warning(
        describe_miss(family, name, ref, took_s, sla),
        extra={"sla_family": family, "sla_name": name, "sla_ref": ref, "took_s": took_s, "sla_s": sla.total_seconds()},
    )
