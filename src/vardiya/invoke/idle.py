"""How an idle worker waits: for a notification of new work, or until its next item comes due.

Waiting for a due time goes through ``Clock.wait``: the real clock lets the waker block (returning early
when work is enqueued or the worker is stopped, and at the latest after ``poll_max`` as a safety net);
a virtual clock moves straight to the due time, which is what lets ``run(until_idle=True)`` replay
retries and back-offs in virtual time without a check of the clock's type.

What an idle worker waits for is logged once (``IdleLog``, INFO on ``vardiya.worker``): the next due
item's time and kind, a rate-limited handler's next token, or new work; and once when work resumes.
An operator reading the log of a quiet worker sees why it is quiet without a line every poll.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime

from ..clock import Clock
from .wake import Waker

__all__ = ["Awaited", "IdleLog", "IdleWait"]

log = logging.getLogger("vardiya.worker")


@dataclass(frozen=True, kw_only=True)
class Awaited:
    """What an idle worker waits for: ``what`` (an item kind, a handler's next token) due ``at``, or
    new work (``at`` None: only an enqueue wakes it, or its poll)."""

    at: datetime | None
    what: str = "new work"
    #: the wait is for a rate limit's next token (the worker wakes then, not at its poll)
    token: bool = False

    def describe(self) -> str:
        """The log line's tail: ``call:ping due at 2026-12-01T00:00:05+00:00``, or ``new work``."""
        return "new work" if self.at is None else f"{self.what} due at {self.at.isoformat()}"


class IdleLog:
    """The idle and resume lines of one worker, shared by its threads.

    The worker is idle when every one of its ``threads`` threads waits: then what it waits for is
    logged, again only when that changes; the first claim after it logs that work resumed. A thread
    idle while the others work logs nothing (the worker is busy).
    """

    def __init__(self, owner: str, threads: int) -> None:
        self.owner = owner
        self.threads = threads
        self._idle: set[int] = set()
        self._logged: Awaited | None = None
        self._lock = threading.Lock()

    def waiting(self, awaited: Awaited) -> None:
        """This thread found nothing to claim and waits for ``awaited``."""
        with self._lock:
            self._idle.add(threading.get_ident())
            if len(self._idle) < self.threads or awaited == self._logged:
                return
            self._logged = awaited
        log.info(
            "%s idle: waiting for %s", self.owner, awaited.describe(),
            extra={"owner": self.owner, "waiting_for": awaited.what, "due_at": None if awaited.at is None else awaited.at.isoformat()},
        )

    def resumed(self) -> None:
        """This thread claimed work: if the worker was logged idle, log that work resumed."""
        if not self._idle:  # the busy path: no lock while nothing is idle
            return
        with self._lock:
            self._idle.discard(threading.get_ident())
            if self._logged is None:
                return
            self._logged = None
        log.info("%s: work resumed", self.owner, extra={"owner": self.owner})


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
        timeout = None if coming is None else (coming - self.clock.now()).total_seconds()
        if timeout is not None and timeout <= 0:
            timeout = self.poll_min_s  # due already, yet not claimed (a lease not reaped yet): not a spin
        self.waker.wait(self.stop, timeout=timeout)

    def close(self) -> None:
        self.waker.close()
