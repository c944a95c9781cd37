"""What a scheduler leaves alone because it is paused: its schedules' view of the ``paused`` table.

A schedule is paused when its slot job, its periodic function, its pipeline trigger or that trigger's
pipeline is. A paused schedule is not decided at all: its stored cursor stays where the pause found it,
so nothing is fired and nothing is counted as passed by while it is paused. When it is resumed, the
ticks planned meanwhile are treated as missed during downtime from the moment of the resume: the
schedule's own ``CatchUpPolicy`` decides which of them fire (the latest one by default), as Airflow's
unpause does with ``catchup``. The scheduler reads the table once per step (one small read) and logs
each pause and resume once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from ..schedule.periodic import PERIODIC_PREFIX
from ..schedule.plan import PIPELINE_PREFIX, TICK_PREFIX
from ..store.controls import ControlKind, Pause

if TYPE_CHECKING:
    from ..store.api import Store

__all__ = ["SchedulePauses", "holders_of"]

log = logging.getLogger("vardiya.scheduler")


def holders_of(schedule: str) -> list[tuple[ControlKind, str]]:
    """The (kind, name) pauses that hold schedule ``schedule`` (``tick:JOB``, ``periodic:NAME``,
    ``pipeline:PIPELINE:TRIGGER``), its own first."""
    if schedule.startswith(TICK_PREFIX):
        return [(ControlKind.SLOT_JOB, schedule[len(TICK_PREFIX):])]
    if schedule.startswith(PERIODIC_PREFIX):
        return [(ControlKind.PERIODIC, schedule[len(PERIODIC_PREFIX):])]
    if schedule.startswith(PIPELINE_PREFIX):
        trigger = schedule[len(PIPELINE_PREFIX):]
        pipeline = trigger.split(":", 1)[0]
        return [(ControlKind.TRIGGER, trigger), (ControlKind.PIPELINE, pipeline)]
    return []


class SchedulePauses:
    """Which of a scheduler's schedules (and sensors) are paused, and since when each was resumed."""

    def __init__(self, store: Store, names: Iterable[str]) -> None:
        self._store = store
        self._holders = {name: holders_of(name) for name in names}
        self.paused: frozenset[str] = frozenset()
        self._resumed_at: dict[str, datetime] = {}

    def check(self, now: datetime) -> frozenset[str]:
        """Read what is paused; returns the paused schedule names (logging the ones newly paused or resumed).

        A failed read keeps the last view: a store that cannot be read fails the step's own writes
        next, which is where the scheduler reports it.
        """
        try:
            pauses = {(pause.kind, pause.name): pause for pause in self._store.controls.paused()}
        except Exception:
            log.warning("could not read what is paused; keeping the last view", exc_info=True)
            return self.paused
        paused: dict[str, Pause] = {}
        for name, holders in self._holders.items():
            held = next((pauses[holder] for holder in holders if holder in pauses), None)
            if held is not None:
                paused[name] = held
        for name in sorted(set(paused) - self.paused):
            pause = paused[name]
            why = f" ({pause.reason})" if pause.reason else ""
            log.info(
                "%s: paused (%s %s since %s%s); fires nothing until resumed", name, pause.kind.value, pause.name,
                pause.paused_at.isoformat(), why, extra={"schedule": name, "paused": True},
            )
        for name in sorted(self.paused - set(paused)):
            self._resumed_at[name] = now
            log.info(
                "%s: resumed; the ticks planned while it was paused go to its catch-up policy", name,
                extra={"schedule": name, "paused": False},
            )
        self.paused = frozenset(paused)
        return self.paused

    def live_from(self, name: str, live_from: datetime) -> datetime:
        """When ``name`` began to be scheduled continuously: the scheduler's start, or its resume if later."""
        resumed = self._resumed_at.get(name)
        return live_from if resumed is None or resumed <= live_from else resumed
