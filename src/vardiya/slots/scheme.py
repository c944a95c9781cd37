"""Slot schemes: which slot a record is in, and when a slot's window is. Pure arithmetic, no I/O.

A ``SlotScheme`` spreads records over B slots of a period by a pure function of the record id, and lays
the slots out as B windows of the period. Everything here is a function of its arguments: the runner
derives (period, slot) once from a tick's *planned* time and never reads a clock to decide it.

Periods
    A period that divides a day (1 day, 1 h, 10 min, ...) is aligned to local midnight in the scheme's
    zone and laid out in *wall time*: the day period of 2026-03-08 in New York is the wall-clock day
    00:00-24:00 local, 23 real hours long. Any other period (longer than a day, or one that does not
    divide a day such as 7 min) is aligned to the Unix epoch in UTC and laid out in elapsed time, so
    DST never touches it; its zone only decides how its times are displayed.

Keys
    A period is identified by its start: ``2026-12-01`` for day periods, the local wall start
    ``2026-12-01T10:30`` (seconds added when the period is not whole minutes) for sub-day periods, and
    the UTC start ``2026-12-03T00:00:00Z`` for epoch-aligned periods.

Times
    Periods, windows and ticks carry aware datetimes in the scheme's zone. Compare or subtract them in
    UTC (``.astimezone(timezone.utc)``): Python compares two datetimes of the same zone by wall time,
    so across a DST change ``end - start`` of one zone is the wall-clock, not the real, duration, and
    an ambiguous local time never compares equal to a datetime of another zone (PEP 495).

DST policy (wall-time periods)
    Slot s keeps its wall-clock window every day, e.g. 02:00-03:00 for slot 2 of 24.

    - Spring forward: a window whose wall time does not exist at all has ``exists=False``, an empty
      window at the transition, and gets no tick; its records are taken by the next tick's backlog. A
      window the gap cuts only partly starts where the gap ends, and a tick planned inside the gap fires
      there if that instant is still in its window (otherwise it does not fire).
    - Fall back: a repeated wall time belongs to one slot. Its window starts at the first occurrence
      (fold=0) and ends at the first instant of the next wall window, so windows still tile the real
      period; ``planned_times`` yields a tick for both occurrences, and the ledger makes the second a
      compensation run. When a repeat is longer than a window, the second occurrence of a wall time
      lies after that window's ``end``: it is located by its wall time, not by the window's span.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from typing import NamedTuple, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..clock import ensure_aware
from ..errors import InvalidInput
from .hashing import HASH_VERSION, RecordId, hash_slot

__all__ = [
    "Assign",
    "Layout",
    "Period",
    "PlannedTick",
    "SlotPosition",
    "SlotScheme",
    "SlotWindow",
    "describe_duration",
    "parse_scheme",
]

DAY = timedelta(days=1)
_HOUR = timedelta(hours=1)
_SECOND = timedelta(seconds=1)
_WALL_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 - naive on purpose: the origin of local wall time
_UTC_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Assign(StrEnum):
    """How a record id becomes a slot."""

    MOD = "mod"  # id mod B, floor modulo; integer ids only
    HASH = "hash"  # H(id) mod B with the versioned stable hash of vardiya.slots.hashing


class Layout(StrEnum):
    """How slot numbers map to windows of the period."""

    SEQUENTIAL = "sequential"  # slot s is window s
    NESTED = "nested"  # slot s is sub-window s div b of coarse window s mod b (B = k * b)


@dataclass(frozen=True, kw_only=True)
class Period:
    """One occurrence of a scheme's period: ``index`` counts periods from the 1970 origin."""

    index: int
    key: str
    start: datetime
    end: datetime


@dataclass(frozen=True, kw_only=True)
class SlotWindow:
    """Where a slot falls in one period; ``exists`` is false when none of its wall time exists that day."""

    slot: int
    start: datetime
    end: datetime
    exists: bool


@dataclass(frozen=True, kw_only=True)
class SlotPosition:
    """The (period, slot) a planned time belongs to, with the slot's window in that period."""

    period: Period
    slot: int
    window: SlotWindow


class PlannedTick(NamedTuple):
    """A tick to fire: its planned time (aware, in the scheme's zone), period and slot."""

    planned_time: datetime
    period: Period
    slot: int


_Choice = TypeVar("_Choice", bound=StrEnum)


def _enum(kind: type[_Choice], value: object, field: str) -> _Choice:
    if isinstance(value, str):  # a member is a str too
        try:
            return kind(value)
        except ValueError:
            pass
    choices = " or ".join(repr(member.value) for member in kind)
    raise InvalidInput(f"{field}={value!r} is not known; use {choices}")


def describe_duration(period: timedelta) -> str:
    """A duration as people write it: ``1 day``, ``7 min``, ``1 h 30 min`` (``0 s`` for none)."""
    seconds, parts = int(period.total_seconds()), []
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        amount, seconds = divmod(seconds, size)
        parts += [f"{amount} {unit}{'s' if unit == 'day' and amount > 1 else ''}"] if amount else []
    return " ".join(parts) or "0 s"


def _divisors_near(number: int, target: int) -> list[int]:
    """The divisors of ``number`` just below and just above ``target``, to suggest in a message."""
    below = next((d for d in range(min(target, number + 1) - 1, 0, -1) if number % d == 0), None)
    above = next((d for d in range(target + 1, min(number, target + 100_000) + 1) if number % d == 0), None)
    return [d for d in (below, above) if d is not None]


@dataclass(frozen=True, kw_only=True)
class SlotScheme:
    """B slots over a period: the pure map from record id to slot and from slot to window.

    ``assign`` and ``layout`` accept their string values ("hash", "nested"). For ``layout="nested"``,
    ``coarse`` is b with B = k * b; it defaults to the number of hours in the period, so 48 nested slots
    of a day keep every record in the hour it had with 24 slots.
    """

    slots: int
    period: timedelta = DAY
    assign: Assign = Assign.MOD
    tz: str = "UTC"
    layout: Layout = Layout.SEQUENTIAL
    coarse: int | None = None

    def __post_init__(self) -> None:
        slots, period = self.slots, self.period
        if isinstance(slots, bool) or not isinstance(slots, int) or slots <= 0:
            raise InvalidInput(f"slots must be a positive integer, got {slots!r}; use e.g. slots=24")
        if not isinstance(period, timedelta) or period <= timedelta(0) or period % _SECOND:
            raise InvalidInput(f"period must be a positive whole number of seconds, got {period!r}")
        seconds = period // _SECOND
        if seconds % slots:
            near = " or ".join(map(str, _divisors_near(seconds, slots)))
            raise InvalidInput(
                f"slots={slots} does not divide a period of {describe_duration(period)} ({seconds} s) into "
                f"windows of whole seconds; use a divisor of {seconds} such as {near}, or another period"
            )
        if not isinstance(self.tz, str):
            raise InvalidInput(f"tz must be an IANA zone name, got {self.tz!r}; use e.g. 'Europe/Istanbul'")
        try:
            object.__setattr__(self, "_zone", ZoneInfo(self.tz))  # not a field: kept out of eq and repr
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidInput(
                f"unknown time zone {self.tz!r}; use an IANA name such as 'Europe/Istanbul' or 'UTC'"
            ) from None
        object.__setattr__(self, "assign", _enum(Assign, self.assign, "assign"))
        object.__setattr__(self, "layout", _enum(Layout, self.layout, "layout"))
        object.__setattr__(self, "coarse", self._checked_coarse())

    def _checked_coarse(self) -> int | None:
        coarse, slots = self.coarse, self.slots
        if self.layout is Layout.SEQUENTIAL:
            if coarse is not None:
                raise InvalidInput(f"coarse={coarse!r} only applies to layout='nested'; drop it")
            return None
        if coarse is None:
            hours, rest = divmod(self.period, _HOUR)
            if rest or not hours or slots % hours:
                raise InvalidInput(
                    f"layout='nested' needs coarse=b with slots = k * b; the period of "
                    f"{describe_duration(self.period)} is not a whole number of hours dividing {slots}, "
                    f"so pass coarse= a divisor of {slots}"
                )
            return hours
        if isinstance(coarse, bool) or not isinstance(coarse, int) or coarse <= 0 or slots % coarse:
            near = " or ".join(map(str, _divisors_near(slots, coarse if isinstance(coarse, int) else 1)))
            raise InvalidInput(
                f"coarse={coarse!r} does not divide slots={slots} (nested needs slots = k * coarse); "
                f"use a divisor of {slots} such as {near}"
            )
        return coarse

    # -- identity ---------------------------------------------------------------------------------

    @property
    def zone(self) -> ZoneInfo:
        """The scheme's time zone."""
        zone: ZoneInfo = self.__dict__["_zone"]
        return zone

    @property
    def window_length(self) -> timedelta:
        """The wall-time length of one slot window: period / B."""
        return self.period // self.slots

    @property
    def wall_time(self) -> bool:
        """True when periods are laid out in local wall time (the period divides a day)."""
        return self.period <= DAY and DAY % self.period == timedelta(0)

    @property
    def fingerprint(self) -> str:
        """A stable text that changes iff B, period, assign (and H's version), tz, layout or coarse do.

        The hash version appears only for ``assign="hash"``: a mod scheme does not depend on H.
        """
        assign = f"hash-v{HASH_VERSION}" if self.assign is Assign.HASH else "mod"
        layout = f"nested-{self.coarse}" if self.layout is Layout.NESTED else "sequential"
        return f"{self.slots}:{self.period // _SECOND}s:{assign}:{self.tz}:{layout}"

    # -- record id -> slot -> window --------------------------------------------------------------

    def slot_of(self, record_id: RecordId) -> int:
        """The slot of a record: floor ``id mod B`` or ``H(id) mod B``; the same answer forever."""
        if self.assign is Assign.HASH:
            return hash_slot(record_id, self.slots)
        if isinstance(record_id, str):
            raise InvalidInput(
                f"record id {record_id!r} is a string but assign='mod' needs integer ids; "
                "use assign='hash' for string ids (or parse numeric text to int first)"
            )
        if isinstance(record_id, bool) or not isinstance(record_id, int):
            raise InvalidInput(f"record id {record_id!r} must be an int under assign='mod'")
        return record_id % self.slots

    def window_index(self, slot: int) -> int:
        """The position (0..B-1) of a slot's window in the period, by layout."""
        if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < self.slots:
            raise InvalidInput(f"slot {slot!r} is out of range; slots are 0..{self.slots - 1}")
        if self.layout is Layout.NESTED:
            assert self.coarse is not None
            return (slot % self.coarse) * (self.slots // self.coarse) + slot // self.coarse
        return slot

    def slot_at_window(self, index: int) -> int:
        """The slot whose window is the ``index``-th of the period: the inverse of ``window_index``."""
        if not 0 <= index < self.slots:
            raise InvalidInput(f"window {index!r} is out of range; windows are 0..{self.slots - 1}")
        if self.layout is Layout.NESTED:
            assert self.coarse is not None
            per_coarse = self.slots // self.coarse
            return (index % per_coarse) * self.coarse + index // per_coarse
        return index

    def window_offset(self, slot: int) -> timedelta:
        """How far (in wall time) a slot's window starts after its period's start."""
        return self.window_index(slot) * self.window_length

    # -- wall time ----------------------------------------------------------------------------------

    def _occurrences(self, wall: datetime) -> list[datetime]:
        """The UTC instants showing local wall time ``wall``: none (gap), one, or two (repeat)."""
        zone = self.zone
        candidates = {wall.replace(tzinfo=zone, fold=fold).astimezone(UTC) for fold in (0, 1)}
        return sorted(u for u in candidates if u.astimezone(zone).replace(tzinfo=None) == wall)

    def _gap_end(self, wall: datetime) -> datetime:
        """The transition instant of the spring-forward gap containing the nonexistent ``wall``."""
        zone = self.zone
        # fold=1 reads the gap with the offset after the jump (an instant before it), fold=0 with the
        # offset before (an instant after it); the transition lies between, at a whole second.
        low = math.floor(wall.replace(tzinfo=zone, fold=1).timestamp())
        high = math.ceil(wall.replace(tzinfo=zone, fold=0).timestamp())
        after = datetime.fromtimestamp(high, zone).utcoffset()
        while high - low > 1:
            middle = (low + high) // 2
            if datetime.fromtimestamp(middle, zone).utcoffset() == after:
                high = middle
            else:
                low = middle
        return datetime.fromtimestamp(high, UTC)

    def _boundary(self, wall: datetime) -> datetime:
        """The first instant at or after local wall time ``wall`` (fold=0; a gap maps to its end)."""
        zone = self.zone
        first = wall.replace(tzinfo=zone).astimezone(UTC)  # fold=0: the first occurrence
        if first.astimezone(zone).replace(tzinfo=None) == wall:
            return first
        return self._gap_end(wall)

    # -- periods ------------------------------------------------------------------------------------

    def _index_of(self, utc: datetime) -> int:
        if self.wall_time:
            return (utc.astimezone(self.zone).replace(tzinfo=None) - _WALL_EPOCH) // self.period
        return (utc - _UTC_EPOCH) // self.period

    def _period(self, index: int) -> Period:
        return _cached_period(self, index)  # a pure function of the scheme: every job sharing it asks

    def _compute_period(self, index: int) -> Period:
        zone = self.zone
        if not self.wall_time:
            start = _UTC_EPOCH + index * self.period
            key = start.strftime("%Y-%m-%dT%H:%M:%SZ")
            end = start + self.period
            return Period(index=index, key=key, start=start.astimezone(zone), end=end.astimezone(zone))
        wall = _WALL_EPOCH + index * self.period
        if self.period == DAY:
            key = wall.date().isoformat()
        else:
            key = wall.isoformat(timespec="seconds" if self.period % timedelta(minutes=1) else "minutes")
        start, end = self._boundary(wall), self._boundary(wall + self.period)
        return Period(index=index, key=key, start=start.astimezone(zone), end=end.astimezone(zone))

    def period_of(self, moment: datetime) -> Period:
        """The period a moment belongs to (by its local wall time for wall-time periods)."""
        return self._period(self._index_of(ensure_aware(moment, "moment")))

    def period_after(self, period: Period, count: int = 1) -> Period:
        """The period ``count`` periods after ``period`` (before it, when negative), e.g. for catch-up."""
        return self._period(period.index + count)

    def period_for_key(self, key: str) -> Period:
        """The period a key names (the inverse of ``Period.key``), e.g. for ``--period 2026-12-01``."""
        example = self._period(self._index_of(datetime(2026, 12, 1, tzinfo=self.zone))).key
        problem = InvalidInput(f"{key!r} is not a period of this scheme; periods look like {example!r}")
        try:
            if not self.wall_time:
                if not key.endswith("Z"):
                    raise problem
                delta = datetime.fromisoformat(key[:-1]) - _WALL_EPOCH
            elif self.period == DAY:
                delta = datetime.combine(date.fromisoformat(key), datetime.min.time()) - _WALL_EPOCH
            else:
                delta = datetime.fromisoformat(key) - _WALL_EPOCH
        except (TypeError, ValueError):
            raise problem from None
        index, rest = divmod(delta, self.period)
        period = self._period(index)
        if rest or period.key != key:
            raise problem
        return period

    # -- windows and positions --------------------------------------------------------------------

    def _window(self, index: int, slot: int) -> SlotWindow:
        offset = self.period * index + self.window_offset(slot)
        if self.wall_time:
            wall = _WALL_EPOCH + offset
            start, end = self._boundary(wall), self._boundary(wall + self.window_length)
        else:
            start = _UTC_EPOCH + offset
            end = start + self.window_length
        zone = self.zone
        return SlotWindow(
            slot=slot, start=start.astimezone(zone), end=end.astimezone(zone), exists=start < end
        )

    def window(self, period: Period, slot: int) -> SlotWindow:
        """The window of ``slot`` in ``period`` (a period of this scheme), in the scheme's zone."""
        if self._period(period.index) != period:
            raise InvalidInput(f"period {period.key!r} does not belong to the scheme {self.fingerprint}")
        return self._window(period.index, slot)

    def locate(self, moment: datetime) -> SlotPosition:
        """The (period, slot) a planned time falls in; both occurrences of a repeated wall time agree."""
        utc = ensure_aware(moment, "planned time")
        delta = utc.astimezone(self.zone).replace(tzinfo=None) - _WALL_EPOCH if self.wall_time else utc - _UTC_EPOCH
        index, within = divmod(delta, self.period)
        slot = self.slot_at_window(within // self.window_length)
        return SlotPosition(period=self._period(index), slot=slot, window=self._window(index, slot))

    # -- ticks --------------------------------------------------------------------------------------

    def _period_ticks(self, index: int, offsets: list[timedelta]) -> tuple[tuple[datetime, int, int], ...]:
        """(UTC instant, period index, slot) of every tick of one period, in no particular order.

        Cached: the scheduler asks for the same periods of the same scheme for every job that shares
        it, twice a step (what is due, what comes next), and laying out a wall-time day through its
        zone is most of a step's cost (benchmarks/README.md, bench_scheduler).
        """
        return _cached_period_ticks(self, index, tuple(offsets))

    def _compute_period_ticks(self, index: int, offsets: list[timedelta]) -> Iterator[tuple[datetime, int, int]]:
        length = self.window_length
        period_offset = self.period * index
        for position in range(self.slots):
            slot = self.slot_at_window(position)
            if not self.wall_time:
                start = _UTC_EPOCH + period_offset + position * length
                yield from ((start + offset, index, slot) for offset in offsets)
                continue
            wall = _WALL_EPOCH + period_offset + position * length
            start, end = self._boundary(wall), self._boundary(wall + length)
            if start >= end:
                continue  # the whole window is in a spring-forward gap: no tick, the backlog takes it
            for offset in offsets:
                instants = self._occurrences(wall + offset)
                if not instants:
                    instants = [self._gap_end(wall + offset)]
                    if instants[0] >= end:
                        continue
                yield from ((instant, index, slot) for instant in instants)

    def _latest_end(self, index: int) -> datetime:
        """An instant after every real instant of period ``index`` (its end, or a repeat of it)."""
        if not self.wall_time:
            return _UTC_EPOCH + self.period * (index + 1)
        wall_end = _WALL_EPOCH + self.period * (index + 1)
        return (self._occurrences(wall_end) or [self._gap_end(wall_end)])[-1]

    def planned_times(
        self, start: datetime, end: datetime, offsets: Iterable[timedelta] = (timedelta(0),)
    ) -> Iterator[PlannedTick]:
        """Every planned tick in [start, end), in time order: per slot window, one per offset.

        This is what ``vardiya replay`` and the scheduler fire. A window lost to spring forward yields
        nothing; a repeated wall time yields a tick for each occurrence (the second is a compensation run).
        """
        checked = list(offsets)
        for offset in checked:
            if not isinstance(offset, timedelta) or not timedelta(0) <= offset < self.window_length:
                raise InvalidInput(
                    f"tick offset {offset!r} must be a timedelta within a slot window "
                    f"(0 <= offset < {self.window_length}), e.g. timedelta(minutes=1)"
                )
        if not checked:
            raise InvalidInput("give at least one tick offset, e.g. [timedelta(minutes=1)]")
        return self._ticks(ensure_aware(start, "start"), ensure_aware(end, "end"), sorted(set(checked)))

    def _ticks(self, start: datetime, end: datetime, offsets: list[timedelta]) -> Iterator[PlannedTick]:
        index = self._index_of(start)
        # After a fall back, an earlier period's repeated wall times may still come after ``start``.
        while self._latest_end(index - 1) > start:
            index -= 1
        heap: list[tuple[datetime, int, int]] = []
        periods: dict[int, Period] = {}
        last: tuple[datetime, int, int] | None = None

        def ready(before: datetime | None) -> Iterator[PlannedTick]:
            nonlocal last
            while heap and (before is None or heap[0][0] < before):
                tick = heapq.heappop(heap)
                if tick != last and start <= tick[0] < end:
                    yield PlannedTick(tick[0].astimezone(self.zone), periods[tick[1]], tick[2])
                last = tick

        while True:
            period = self._period(index)
            if period.start.astimezone(UTC) >= end:
                break
            periods[index] = period
            for tick in self._period_ticks(index, offsets):
                heapq.heappush(heap, tick)
            # Ticks of later periods are never before this period's end: these are final.
            yield from ready(period.end.astimezone(UTC))
            if not heap:
                periods = {index: period}
            index += 1
        yield from ready(None)


@functools.lru_cache(maxsize=4_096)
def _cached_period(scheme: SlotScheme, index: int) -> Period:
    return scheme._compute_period(index)


@functools.lru_cache(maxsize=4_096)
def _cached_period_ticks(
    scheme: SlotScheme, index: int, offsets: tuple[timedelta, ...]
) -> tuple[tuple[datetime, int, int], ...]:
    return tuple(scheme._compute_period_ticks(index, list(offsets)))


def parse_scheme(text: str, *, period: timedelta = DAY, tz: str = "UTC") -> SlotScheme:
    """A scheme from CLI text: ``24``, ``48:nested``, ``24:hash``, ``48:hash:nested``."""
    parts = [part.strip().lower() for part in str(text).split(":")]
    usage = (
        f"scheme {text!r} is not understood; write B[:mod|hash][:sequential|nested], "
        "e.g. '48:hash:nested'"
    )
    if not (parts[0].isascii() and parts[0].isdigit()):
        raise InvalidInput(usage)
    options: dict[str, str] = {}
    for part in parts[1:]:
        field = "assign" if part in set(Assign) else "layout" if part in set(Layout) else None
        if field is None or field in options:
            raise InvalidInput(usage)
        options[field] = part
    return SlotScheme(slots=int(parts[0]), period=period, tz=tz, **options)  # type: ignore[arg-type]
