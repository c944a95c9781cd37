"""SQLite specifics of the store: times as UTC text, and work-item times as integer microseconds.

SQLite has no time type. A ``UTCDateTime`` column holds UTC text in SQLAlchemy's fixed-width SQLite
format (``2026-12-01 00:00:00.000000``), which sorts and compares as the times do; a ``UTCMicros``
column (the work items') holds whole microseconds since 1970-01-01 UTC, 8 bytes that compare as
integers (``types.UTCMicros`` says why). A naive datetime is refused: its zone would be a guess.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from ..clock import ensure_aware
from .url import Backend

__all__ = ["SQLITE_TIMES", "SQLiteTimes"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


class SQLiteTimes:
    """The store's times on SQLite (``backend.BackendTimes``)."""

    backend = Backend.SQLITE

    def time(self, moment: datetime | None) -> str | None:
        """UTC text in SQLAlchemy's SQLite DATETIME format, as ``UTCDateTime`` stores it."""
        if moment is None:
            return None
        if moment.tzinfo is not UTC:  # the engine's own clock readings skip the conversion
            moment = ensure_aware(moment, "timestamp")
        return moment.isoformat(" ", "microseconds")[:26]  # drop the "+00:00"

    def item_time(self, moment: datetime | None) -> int | None:
        """Microseconds since the epoch, as ``UTCMicros`` stores a work-item time."""
        if moment is None:
            return None
        if moment.tzinfo is None or moment.tzinfo.utcoffset(moment) is None:
            ensure_aware(moment, "timestamp")  # raises, saying why
        return (moment - _EPOCH) // _MICROSECOND

    def read_time(self, value: Any) -> datetime | None:
        """Either column's value (integer microseconds, UTC text, or a naive UTC datetime) as aware UTC."""
        if value is None:
            return None
        if isinstance(value, int):
            return _EPOCH + timedelta(microseconds=value)
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


SQLITE_TIMES = SQLiteTimes()
