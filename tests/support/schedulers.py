"""In-process schedulers stepped on a virtual clock, for the scheduler contract tests."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime

from vardiya.clock import VirtualClock
from vardiya.service.scheduler import Scheduler


def at(clock: VirtualClock, moment: datetime) -> None:
    """Move the clock forwards to ``moment`` (as time passes: monotonic time moves too)."""
    clock.advance(moment - clock.now())


def step_together(schedulers: Sequence[Scheduler]) -> list[str]:
    """Step every scheduler at once (threads released by one barrier); the keys each reports it fired."""
    barrier = threading.Barrier(len(schedulers))
    lock = threading.Lock()
    fired: list[str] = []

    def step(scheduler: Scheduler) -> None:
        barrier.wait()
        report = scheduler.step()
        with lock:
            fired.extend(firing.key for firing in report.fired)

    threads = [threading.Thread(target=step, args=(scheduler,)) for scheduler in schedulers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return fired
