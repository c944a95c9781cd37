"""Partition sets: which keys a stage runs for, in order. Pure, no I/O.

A partition set is an ordered tuple of keys. The order is what ``offset(-1)`` and ``window(-3, 0)``
count in, what ``A..B`` selections span, and how the graph's topological order lists a stage's tasks.

    Monthly(start="2026-01", end="2026-12")        2026-01 .. 2026-12, both ends included
    Daily(start="2026-01-01", end="2026-01-31")    ISO dates, both ends included
    Static(keys=["north", "south"])                the keys as given, in that order
    Unpartitioned()                                one partition, key "" (the task is the stage name alone)

Keys never contain ``@``: a task is named ``stage@key``. Month arithmetic is done on a month count
(``12 * year + month - 1``), so no calendar library is needed and no month is ever skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from enum import StrEnum
from typing import ClassVar

from ..errors import InvalidInput

__all__ = [
    "Daily",
    "Monthly",
    "PartitionKind",
    "PartitionSet",
    "Static",
    "Unpartitioned",
]

_MONTH = re.compile(r"(\d{4})-(\d{2})")
_SHOWN_STATIC_KEYS = 6  # how many static keys a message lists before it says "..."


class PartitionKind(StrEnum):
    """What kind of keys a partition set has."""

    MONTHLY = "monthly"
    DAILY = "daily"
    STATIC = "static"
    UNPARTITIONED = "unpartitioned"


class PartitionSet:
    """What every partition set shares: positions, offsets and ``A..B`` ranges over its ordered ``keys``.

    Subclasses are frozen dataclasses; each sets ``keys`` once in ``__post_init__`` and never changes it.
    """

    kind: ClassVar[PartitionKind]
    keys: tuple[str, ...]

    def _freeze(self, keys: tuple[str, ...]) -> None:
        # Not dataclass fields: the declared fields (start, end) stay the identity, eq and repr.
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "_positions", {key: position for position, key in enumerate(keys)})

    @property
    def label(self) -> str:
        """The set as a message shows it: ``Monthly 2026-01..2026-12``."""
        return f"{type(self).__name__} {self.span}"

    @property
    def span(self) -> str:
        """The valid keys in short: ``2026-01..2026-12``."""
        return f"{self.keys[0]}..{self.keys[-1]}"

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys)

    def __contains__(self, key: object) -> bool:
        return key in self.__dict__["_positions"]

    def position(self, key: str) -> int | None:
        """The position of ``key`` in the set, or None when it is not a key of the set."""
        position: int | None = self.__dict__["_positions"].get(key)
        return position

    def index(self, key: str) -> int:
        """The position of ``key``; a key outside the set is an error that shows the valid keys."""
        position = self.position(key)
        if position is None:
            raise InvalidInput(f"partition {key!r} is not in {self.label}; use a key in {self.span}")
        return position

    def offset(self, key: str, count: int) -> str | None:
        """The key ``count`` positions after ``key`` (before it when negative); None when that is outside."""
        target = self.index(key) + count
        return self.keys[target] if 0 <= target < len(self.keys) else None

    def range(self, first: str, last: str) -> tuple[str, ...]:
        """The keys from ``first`` to ``last``, both included: what a ``first..last`` selection means."""
        start, end = self.index(first), self.index(last)
        if start > end:
            raise InvalidInput(
                f"partition range {first}..{last} of {self.label} runs backwards; "
                f"write the earlier key first: {last}..{first}"
            )
        return self.keys[start : end + 1]

    def select(self, text: str) -> tuple[str, ...]:
        """The keys a CLI selection names: ``A..B`` (a range) or ``A`` (one key)."""
        if text not in self and ".." in text:
            first, _, last = text.partition("..")
            return self.range(first, last)
        return (self.keys[self.index(text)],)


def _checked_month(value: object, field: str) -> int:
    """A ``YYYY-MM`` text as a month count, so that adding one is always the next month."""
    match = _MONTH.fullmatch(value) if isinstance(value, str) else None
    if match is None or not 1 <= int(match.group(2)) <= 12:
        raise InvalidInput(f"{field}={value!r} is not a month; write it as YYYY-MM, e.g. '2026-01'")
    return 12 * int(match.group(1)) + int(match.group(2)) - 1


def _checked_day(value: object, field: str) -> date:
    """An ISO date text (``2026-01-31``); a ``date`` is accepted and read the same way."""
    if isinstance(value, date) and type(value) is date:
        return value
    try:
        day = date.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        day = None
    # fromisoformat also reads 20260131 and 2026-W05-6; keys are one spelling only.
    if day is None or day.isoformat() != value:
        raise InvalidInput(f"{field}={value!r} is not a date; write it as YYYY-MM-DD, e.g. '2026-01-31'")
    return day


def _check_order(kind: str, start: str, end: str) -> None:
    if start > end:  # one fixed-width spelling, so text order is time order
        raise InvalidInput(f"{kind}(start={start!r}, end={end!r}) ends before it starts; swap start and end")


@dataclass(frozen=True, kw_only=True)
class Monthly(PartitionSet):
    """One partition per calendar month from ``start`` to ``end`` (``YYYY-MM``, both included)."""

    kind: ClassVar[PartitionKind] = PartitionKind.MONTHLY

    start: str
    end: str

    def __post_init__(self) -> None:
        first, last = _checked_month(self.start, "start"), _checked_month(self.end, "end")
        _check_order("Monthly", self.start, self.end)
        self._freeze(tuple(f"{count // 12:04d}-{count % 12 + 1:02d}" for count in range(first, last + 1)))


@dataclass(frozen=True, kw_only=True)
class Daily(PartitionSet):
    """One partition per calendar day from ``start`` to ``end`` (ISO dates, both included)."""

    kind: ClassVar[PartitionKind] = PartitionKind.DAILY

    start: str
    end: str

    def __post_init__(self) -> None:
        first, last = _checked_day(self.start, "start"), _checked_day(self.end, "end")
        object.__setattr__(self, "start", first.isoformat())
        object.__setattr__(self, "end", last.isoformat())
        _check_order("Daily", self.start, self.end)
        days = (last - first).days
        self._freeze(tuple((first + timedelta(days=number)).isoformat() for number in range(days + 1)))


@dataclass(frozen=True, kw_only=True)
class Static(PartitionSet):
    """A fixed list of keys (regions, customers, ...) in the order given; offsets count in that order."""

    kind: ClassVar[PartitionKind] = PartitionKind.STATIC

    keys: tuple[str, ...]  # a field here, set by __post_init__ on the other sets

    def __post_init__(self) -> None:
        given: object = self.keys
        if isinstance(given, str) or not isinstance(given, Iterable):
            raise InvalidInput(f"Static(keys={given!r}) needs a list of keys, e.g. Static(keys=['north'])")
        keys = tuple(given)
        if not keys:
            raise InvalidInput("Static(keys=[]) has no partitions; give at least one key")
        seen: set[str] = set()
        for key in keys:
            if not isinstance(key, str) or not key or "@" in key:
                raise InvalidInput(
                    f"static partition key {key!r} must be non-empty text without '@' "
                    "(tasks are named stage@key)"
                )
            if key in seen:
                raise InvalidInput(f"static partition key {key!r} is given twice; keys must be unique")
            seen.add(key)
        self._freeze(keys)

    @property
    def span(self) -> str:
        """The keys themselves, a few of them when there are many."""
        shown = ", ".join(self.keys[:_SHOWN_STATIC_KEYS])
        more = ", ..." if len(self.keys) > _SHOWN_STATIC_KEYS else ""
        return f"({shown}{more})"


@dataclass(frozen=True, kw_only=True)
class Unpartitioned(PartitionSet):
    """One partition with key ``""``: the stage runs once, and its task is named by the stage alone."""

    kind: ClassVar[PartitionKind] = PartitionKind.UNPARTITIONED

    def __post_init__(self) -> None:
        self._freeze(("",))

    @property
    def label(self) -> str:
        """``Unpartitioned``: there is nothing to show but the kind."""
        return "Unpartitioned"

    @property
    def span(self) -> str:
        """The only key, ``""``."""
        return "'' (the only partition)"
