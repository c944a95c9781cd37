"""PostgreSQL specifics of the store: times as ``timestamptz``, handed to psycopg as aware datetimes.

Both time column types are ``timestamptz`` here, so a work-item time and any other are converted
alike: psycopg takes an aware datetime and gives one back (in the session's zone, turned to UTC). A
naive datetime is refused: its zone would be a guess.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..clock import ensure_aware
from .url import Backend

__all__ = ["POSTGRES_TIMES", "PostgresTimes"]


class PostgresTimes:
    """The store's times on PostgreSQL (``backend.BackendTimes``)."""

    backend = Backend.POSTGRESQL

    def time(self, moment: datetime | None) -> datetime | None:
        """The aware datetime, in UTC, as psycopg binds it to a ``timestamptz``."""
        return None if moment is None else ensure_aware(moment, "timestamp")

    item_time = time

    def read_time(self, value: Any) -> datetime | None:
        """A ``timestamptz`` as psycopg gives it, in UTC."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


POSTGRES_TIMES = PostgresTimes()
