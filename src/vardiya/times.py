"""Reading times and durations that people type: ISO 8601 instants, and durations like ``90s`` or ``1d``.

Pure. A naive time is read in a zone only when the caller has one to give (a job's or ``--tz``), and
then a wall time that does not exist there (spring forward) or exists twice (fall back) is refused
rather than guessed.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import InvalidInput
from .limits import check_time

__all__ = ["parse_duration", "parse_time", "zone"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d|w)?\s*$", re.IGNORECASE)
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``; an unknown name is a clear error."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError, UnicodeError):  # odd names fail in odd ways
        raise InvalidInput(f"unknown time zone {name!r}; use an IANA name such as 'Europe/Istanbul' or 'UTC'") from None


def parse_time(text: str, *, tz: str | None = None, what: str = "time") -> datetime:
    """An aware datetime from ISO 8601 text; a naive one is read in ``tz`` or refused without it.

    The time must lie in the supported range (``limits.TIME_MIN`` to ``TIME_MAX``).
    """
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{what} {text!r} is not an ISO 8601 time; write e.g. 2026-12-01T14:59:59+03:00") from None
    if moment.tzinfo is not None:
        check_time(moment, what)
        return moment
    if tz is None:
        raise InvalidInput(
            f"{what} {text!r} has no time zone and none is given; add an offset (e.g. {text}+03:00 or {text}Z)"
        )
    place = zone(tz)
    first = moment.replace(tzinfo=place, fold=0)
    check_time(first, what)
    second = moment.replace(tzinfo=place, fold=1)
    if first.utcoffset() != second.utcoffset():
        roundtrip = first.astimezone(UTC).astimezone(place).replace(tzinfo=None)
        problem = "does not exist" if roundtrip != moment else "happens twice"
        raise InvalidInput(
            f"{what} {text!r} {problem} in {tz} (a DST change); add an explicit offset to say which instant"
        )
    return first


def parse_duration(text: str, *, what: str = "duration") -> timedelta:
    """A duration from ``90``, ``90s``, ``15m``, ``2h``, ``1d``, ``1w`` (a bare number is seconds)."""
    match = _DURATION.match(str(text))
    if not match:
        raise InvalidInput(f"{what} {text!r} is not a duration; write e.g. 90s, 15m, 2h or 1d")
    value, unit = float(match.group(1)), (match.group(2) or "s").lower()
    return timedelta(seconds=value * _UNITS[unit])
