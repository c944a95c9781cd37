"""How an idle worker waits: for a notification of new work, or until its next item comes due.

Waiting for a due time goes through ``Clock.wait``: the real clock lets the waker block (returning early
when work is enqueued or the worker is stopped, and at the latest after ``poll_max`` as a safety net);
a virtual clock moves straight to the due time, which is what lets ``run(until_idle=True)`` replay
retries and back-offs in virtual time without a check of the clock's type.
"""

from __future__ import annotations

import threading
from datetime import datetime

from ..clock import Clock
from .wake import Waker

__all__ = ["IdleWait"]


class IdleWait:
    """One thread's idle waits, through its own waker (a LISTEN connection, a ``data_version`` reader)."""

    def __init__(self, clock: Clock, waker: Waker, stop: threading.Event, *, poll_min_s: float, poll_max_s: float) -> None:
        self.clock = clock
        self.waker = waker
        self.stop = stop
        self.poll_min_s = poll_min_s
        self.poll_max_s = poll_max_s

    def worked(self) -> None:
        """Work was found: the next idle wait starts short again."""
        self.waker.reset()

    def until(self, moment: datetime) -> None:
        """Wait until ``moment`` (or a wake-up, or ``poll_max``, whichever comes first)."""
        delay = (moment - self.clock.now()).total_seconds()
        if delay <= 0:
            delay = self.poll_min_s

        def wake(seconds: float) -> None:
            self.waker.wait(self.stop, timeout=min(seconds, self.poll_max_s))

        self.clock.wait(delay, wake)

    def for_work(self, coming: datetime | None = None) -> None:
        """Wait for a notification of new work; when an item is enqueued ahead of its time (a tick the
        scheduler planned), wake when it comes due at the latest."""
        timeout = None if coming is None else max(0.0, (coming - self.clock.now()).total_seconds())
        self.waker.wait(self.stop, timeout=timeout)

    def close(self) -> None:
        self.waker.close()
