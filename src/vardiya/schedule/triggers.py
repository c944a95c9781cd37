"""Pipeline triggers: what starts a pipeline's tasks for a partition. Declarations, checked when made.

- ``Cron(expr, tz)``: a cron expression in a zone (five fields, ``cronsim`` semantics: the same as
  cronie's, so a time that DST skips fires once when the gap ends and a repeated hour fires once). A
  firing runs the partition ``lag`` periods before the one that contains its planned time: a daily
  ``0 3 * * *`` with the default ``lag=1`` runs yesterday's day partition at 03:00 today.
- ``PeriodClose(delay)``: fires when a partition's period closes, plus ``delay``, for that partition.
- ``DataArrival(path=... | sql=..., db=...)``: a sensor. It checks every ``every`` seconds, for each
  partition whose period has begun and that it has not started yet, whether the partition's data exists:
  a path or glob with ``{partition}`` in it (any match counts), or a SQL query with a ``:partition``
  parameter whose first column of the first row is truthy (``SELECT count(*) FROM readings WHERE
  period = :partition``). It starts the partition once, when the data is there.
- ``Upstream(pipeline, stage)``: starts partition P once ``stage@P`` of another pipeline has succeeded.

Every trigger starts the tasks of its ``stages`` (all stages by default) for the partition, upstream
tasks the run needs included (``run_pipeline`` plans them). Time triggers obey a ``CatchUpPolicy`` after
downtime, like slot jobs. A trigger is named (``name``, else its kind and position), and the name says
in ``vardiya pipeline triggers`` what started each run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from ..catchup import CatchUpPolicy
from ..errors import ConfigurationError
from ..limits import check_name
from ..pipeline.partitions import PartitionKind, PartitionSet

__all__ = [
    "Cron",
    "DataArrival",
    "PeriodClose",
    "Trigger",
    "Upstream",
    "check_zone",
    "partition_at",
    "partition_window",
]



def check_zone(tz: object, what: str) -> ZoneInfo:
    """The zone called ``tz``; an unknown name is a ``ConfigurationError`` that says what to give."""
    if not isinstance(tz, str) or not tz:
        raise ConfigurationError(f"{what}: tz must be an IANA zone name such as 'Europe/Istanbul', got {tz!r}")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigurationError(
            f"{what}: unknown time zone {tz!r}; use an IANA name such as 'UTC' or 'Europe/Istanbul'"
        ) from None


def _day(key: str) -> date:
    return date.fromisoformat(key)


def partition_window(partitions: PartitionSet, key: str, zone: ZoneInfo) -> tuple[datetime, datetime] | None:
    """The [start, end) of a day or month partition in ``zone`` (None for static and unpartitioned keys)."""
    if partitions.kind is PartitionKind.DAILY:
        first = _day(key)
        start = datetime(first.year, first.month, first.day, tzinfo=zone)
        following = first + timedelta(days=1)
        return start, datetime(following.year, following.month, following.day, tzinfo=zone)
    if partitions.kind is PartitionKind.MONTHLY:
        year, month = int(key[:4]), int(key[5:7])
        start = datetime(year, month, 1, tzinfo=zone)
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        return start, datetime(year, month, 1, tzinfo=zone)
    return None


def partition_at(partitions: PartitionSet, moment: datetime, zone: ZoneInfo, lag: int = 0) -> str | None:
    """The key of the day or month partition that holds ``moment`` in ``zone``, ``lag`` periods earlier.

    None when that key is outside the set, or for static and unpartitioned sets.
    """
    local = moment.astimezone(zone)
    if partitions.kind is PartitionKind.DAILY:
        key = (local.date() - timedelta(days=lag)).isoformat()
    elif partitions.kind is PartitionKind.MONTHLY:
        count = local.year * 12 + local.month - 1 - lag
        key = f"{count // 12:04d}-{count % 12 + 1:02d}"
    else:
        return None
    return key if key in partitions else None


@dataclass(frozen=True, kw_only=True)
class Trigger:
    """What every trigger has: a name, the stages it starts, and (time triggers) a catch-up policy."""

    kind: ClassVar[str] = "trigger"
    #: A time trigger fires at planned times; the others are sensors, checked every ``every`` seconds.
    timed: ClassVar[bool] = False

    name: str | None = None
    stages: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.name is not None:
            check_name(self.name, "a trigger name")
        if self.stages is not None:
            given: object = self.stages
            if isinstance(given, str) or not isinstance(given, Iterable):
                raise ConfigurationError(f"trigger stages must be a list of stage names, got {given!r}")
            stages = tuple(given)
            if not stages or not all(isinstance(stage, str) and stage for stage in stages):
                raise ConfigurationError(f"trigger stages must be a non-empty list of stage names, got {given!r}")
            object.__setattr__(self, "stages", stages)

    def describe(self) -> str:
        return self.kind


@dataclass(frozen=True, kw_only=True)
class Cron(Trigger):
    """Fire at the times of a cron expression in ``tz``; run the partition ``lag`` periods back."""

    kind: ClassVar[str] = "cron"
    timed: ClassVar[bool] = True

    expr: str
    tz: str = "UTC"
    lag: int = 1
    downtime: CatchUpPolicy = field(default_factory=CatchUpPolicy)

    def __post_init__(self) -> None:
        super().__post_init__()
        zone = check_zone(self.tz, f"Cron({self.expr!r})")
        if not isinstance(self.expr, str):
            raise ConfigurationError(f"a cron expression must be text such as '0 3 * * *', got {self.expr!r}")
        try:
            CronSim(self.expr, datetime(2026, 1, 1, tzinfo=zone))
        except CronSimError as error:
            raise ConfigurationError(
                f"invalid cron expression {self.expr!r} ({error}); write five fields, "
                "minute hour day-of-month month day-of-week, e.g. '0 3 * * *'"
            ) from None
        if isinstance(self.lag, bool) or not isinstance(self.lag, int) or self.lag < 0:
            raise ConfigurationError(f"Cron({self.expr!r}): lag must be a whole number >= 0, got {self.lag!r}")
        if not isinstance(self.downtime, CatchUpPolicy):
            raise ConfigurationError(f"Cron({self.expr!r}): downtime must be a CatchUpPolicy, got {self.downtime!r}")

    def times(self, after: datetime, through: datetime) -> Iterator[datetime]:
        """Planned times in (after, through], in UTC."""
        zone = ZoneInfo(self.tz)
        for moment in CronSim(self.expr, after.astimezone(zone)):
            planned = moment.astimezone(UTC)
            if planned > through:
                return
            if planned > after:
                yield planned

    def describe(self) -> str:
        return f"cron {self.expr!r} in {self.tz}, partition lag {self.lag}"


@dataclass(frozen=True, kw_only=True)
class PeriodClose(Trigger):
    """Fire for each day or month partition when its period closes in ``tz``, plus ``delay``."""

    kind: ClassVar[str] = "period-close"
    timed: ClassVar[bool] = True

    delay: timedelta = timedelta(0)
    tz: str = "UTC"
    downtime: CatchUpPolicy = field(default_factory=CatchUpPolicy)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_zone(self.tz, "PeriodClose")
        if not isinstance(self.delay, timedelta) or self.delay < timedelta(0):
            raise ConfigurationError(f"PeriodClose(delay={self.delay!r}): give a timedelta of 0 or more")
        if not isinstance(self.downtime, CatchUpPolicy):
            raise ConfigurationError(f"PeriodClose: downtime must be a CatchUpPolicy, got {self.downtime!r}")

    def describe(self) -> str:
        return f"when a period closes in {self.tz}, plus {self.delay}"


@dataclass(frozen=True, kw_only=True)
class DataArrival(Trigger):
    """A sensor: start a partition once its data exists (a path or glob, or a SQL query)."""

    kind: ClassVar[str] = "data"

    path: str | None = None
    sql: str | None = None
    db: str | None = None
    every: float = 30.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.path is None) == (self.sql is None):
            raise ConfigurationError(
                "DataArrival needs exactly one of path='landing/{partition}/*.csv' or "
                "sql='SELECT count(*) FROM t WHERE period = :partition' (with db=URL)"
            )
        if self.path is not None and (not isinstance(self.path, str) or "{partition}" not in self.path):
            raise ConfigurationError(
                f"DataArrival(path={self.path!r}): put {{partition}} where the partition key goes, "
                "e.g. 'landing/{partition}/*.csv'"
            )
        if self.sql is not None:
            if not isinstance(self.sql, str) or ":partition" not in self.sql:
                raise ConfigurationError(
                    f"DataArrival(sql={self.sql!r}): the query takes the key as :partition, "
                    "e.g. 'SELECT count(*) FROM readings WHERE period = :partition'"
                )
            if not isinstance(self.db, str) or not self.db:
                raise ConfigurationError("DataArrival(sql=...) needs db=URL of the database to ask")
        elif self.db is not None:
            raise ConfigurationError("DataArrival(db=...) goes with sql=...; a path sensor needs no database")
        if isinstance(self.every, bool) or not isinstance(self.every, int | float) or self.every <= 0:
            raise ConfigurationError(f"DataArrival(every={self.every!r}): give a number of seconds above 0")

    def describe(self) -> str:
        return f"data at {self.path}" if self.path is not None else f"data for SQL {self.sql!r}"


@dataclass(frozen=True, kw_only=True)
class Upstream(Trigger):
    """Start partition P once ``stage@P`` of pipeline ``pipeline`` has succeeded."""

    kind: ClassVar[str] = "upstream"

    pipeline: str
    stage: str
    every: float = 5.0

    def __post_init__(self) -> None:
        super().__post_init__()
        for label, value in (("pipeline", self.pipeline), ("stage", self.stage)):
            if not isinstance(value, str) or not value:
                raise ConfigurationError(f"Upstream({label}={value!r}): give the upstream {label}'s name")
        if isinstance(self.every, bool) or not isinstance(self.every, int | float) or self.every <= 0:
            raise ConfigurationError(f"Upstream(every={self.every!r}): give a number of seconds above 0")

    def describe(self) -> str:
        return f"after {self.stage}@P of pipeline {self.pipeline}"
