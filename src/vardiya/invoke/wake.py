"""How an idle worker waits for work: LISTEN/NOTIFY on PostgreSQL, polling with back-off on SQLite.

Every enqueue, submit, append and batch cut on PostgreSQL sends ``NOTIFY vardiya_work`` (delivered at
commit); a waiting worker holds a dedicated connection that LISTENs and returns the moment one arrives,
so enqueue-to-start latency is a round trip, not a poll interval. The wait still times out at
``poll_max`` as a safety net (a notification lost with a dropped connection, a retry coming due).

SQLite has no notifications, but it says cheaply whether anything changed: ``PRAGMA data_version``
on a connection of the waker's own changes whenever another connection (of any process) commits. A
waiting worker reads it every ``poll_min`` and returns at the first change, still at most after
``poll_max``; a read costs microseconds and touches no table, where a claim attempt at that rate
would take the write lock each time. (``PollWaker``, the exponential back-off from ``poll_min`` to
``poll_max``, serves where no file can be watched.)
"""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..store.streams import NOTIFY_CHANNEL
from ..store.url import Backend

if TYPE_CHECKING:
    from ..store.api import Store

__all__ = ["DataVersionWaker", "ListenWaker", "PollWaker", "Waker", "waker_for"]

log = logging.getLogger("vardiya.worker")


class PollWaker:
    """Sleep with exponential back-off between polls."""

    def __init__(self, poll_min: float, poll_max: float) -> None:
        self.poll_min = poll_min
        self.poll_max = max(poll_min, poll_max)
        self._delay = poll_min

    def wait(self, stop: threading.Event, timeout: float | None = None) -> None:
        delay = self._delay if timeout is None else min(timeout, self.poll_max)
        stop.wait(delay)
        if timeout is None:
            self._delay = min(self.poll_max, self._delay * 2)

    def reset(self) -> None:
        self._delay = self.poll_min

    def close(self) -> None:
        pass


class DataVersionWaker:
    """Wait for a commit to a SQLite file by any other connection: ``PRAGMA data_version`` polled."""

    def __init__(self, path: Path, poll_min: float, poll_max: float) -> None:
        self.poll_min = poll_min
        self.poll_max = max(poll_min, poll_max)
        # Autocommit, reads only: it never takes a lock another connection could wait for.
        self._connection = sqlite3.connect(str(path), isolation_level=None)

    def _version(self) -> int:
        return int(self._connection.execute("PRAGMA data_version").fetchone()[0])

    def wait(self, stop: threading.Event, timeout: float | None = None) -> None:
        limit = self.poll_max if timeout is None else min(timeout, self.poll_max)
        before = self._version()
        # Slices of poll_min, counted rather than timed: the waker reads no clock.
        for _ in range(max(1, math.ceil(limit / self.poll_min))):
            if stop.wait(min(self.poll_min, limit)) or self._version() != before:
                return

    def reset(self) -> None:
        pass

    def close(self) -> None:
        self._connection.close()


class ListenWaker:
    """Wait on ``LISTEN vardiya_work`` over a connection of its own (autocommit)."""

    def __init__(self, store: Store, poll_max: float) -> None:
        import psycopg

        url = store.engine.url.set(drivername="postgresql")
        self.poll_max = poll_max
        self._connection: Any = psycopg.connect(
            url.render_as_string(hide_password=False), autocommit=True, connect_timeout=5
        )
        self._connection.execute(f"LISTEN {NOTIFY_CHANNEL}")

    def wait(self, stop: threading.Event, timeout: float | None = None) -> None:
        # A short slice at a time, so a stop() is noticed within a quarter second.
        remaining = self.poll_max if timeout is None else min(timeout, self.poll_max)
        while remaining > 0 and not stop.is_set():
            step = min(0.25, remaining)
            # Drain only once this generator has ended: while it is open it holds the connection's
            # lock, and a second notifies() inside it would wait for that lock forever.
            woke = False
            for _ in self._connection.notifies(timeout=step, stop_after=1):
                woke = True
            if woke:
                self._drain()
                return
            remaining -= step

    def _drain(self) -> None:
        """Swallow notifications already queued: one wake-up is enough for all of them."""
        for _ in self._connection.notifies(timeout=0, stop_after=1000):
            pass

    def reset(self) -> None:
        pass

    def close(self) -> None:
        try:
            self._connection.close()
        except Exception:  # closing a broken connection is not an error
            log.debug("closing the LISTEN connection failed", exc_info=True)


Waker = PollWaker | DataVersionWaker | ListenWaker


def waker_for(store: Store, poll_min: float, poll_max: float) -> Waker:
    """LISTEN/NOTIFY on PostgreSQL, ``PRAGMA data_version`` polls on SQLite."""
    if store.backend is Backend.POSTGRESQL:
        return ListenWaker(store, poll_max)
    if store.target.path is not None:
        return DataVersionWaker(store.target.path, poll_min, poll_max)
    return PollWaker(poll_min, poll_max)
