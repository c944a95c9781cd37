"""What differs between the store's two databases, behind one small interface: how times are stored.

Statements the store runs as driver SQL (``hot.py``, the call log, pipeline transitions, stream cuts)
bypass SQLAlchemy's column types, so they convert times themselves; ``times_of(backend)`` is that one
conversion, per backend, and the column types of ``types.py`` read with it too. SQLite's is in
``sqlite.py``, PostgreSQL's in ``postgres.py``; ``tests/contract/test_backend_times.py`` checks on
both that an aware datetime round-trips exactly (through the column types and through the driver)
and that a naive one is refused.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from .postgres import POSTGRES_TIMES
from .sqlite import SQLITE_TIMES
from .url import Backend

__all__ = ["BackendTimes", "times_of"]


class BackendTimes(Protocol):
    """How one backend's driver takes and gives the store's times (always UTC, never naive)."""

    @property
    def backend(self) -> Backend: ...

    def time(self, moment: datetime | None) -> Any:
        """A time as the driver takes it for a ``UTCDateTime`` column (every table but work_items)."""
        ...

    def item_time(self, moment: datetime | None) -> Any:
        """A time as the driver takes it for a ``UTCMicros`` column (the work items' times)."""
        ...

    def read_time(self, value: Any) -> datetime | None:
        """A ``UTCDateTime`` or ``UTCMicros`` value as the driver gives it, as an aware UTC datetime."""
        ...


_TIMES: dict[Backend, BackendTimes] = {Backend.SQLITE: SQLITE_TIMES, Backend.POSTGRESQL: POSTGRES_TIMES}


def times_of(backend: Backend) -> BackendTimes:
    """The time conversion of ``backend``."""
    return _TIMES[backend]
