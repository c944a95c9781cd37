"""``vardiya slots backfill``: run exactly the not-done records of a period closed for good.

A period closes for good when no tick's backlog can reach it any more (``SlotJob.closes_at``); its
not-done records (never run, or failed, given-up ones included) then stay not done unless someone runs
them. A backfill runs them once, through the tick runner itself: one run of the job with no limit,
no deadline, no attempt cap and a backlog of exactly that period (``catch_up=0``), planned in the
period's last window, so its own slot goes first and every other slot of the period follows as its
backlog, oldest first. The source selects only records the ledger does not have as done, and every
outcome is marked there, so a backfill run twice (or racing a second one) never runs a done record
again: exactly once, as for any tick.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput
from .closed import NotDone, not_done
from .job import SlotJob
from .runner import TickReport, run_tick
from .scheme import Period

if TYPE_CHECKING:
    from ..clock import Clock
    from ..store import Store

__all__ = ["BackfillReport", "backfill", "check_backfill"]

#: Caps that a backfill lifts: large enough never to bind, small enough for any database's integers.
_NO_CAP = 2**31 - 1
_NO_DEADLINE = timedelta(days=36_500)


@dataclass(frozen=True, kw_only=True)
class BackfillReport:
    """What a backfill found and (unless ``dry_run``) did; ``to_json`` is ``slots backfill --json``."""

    before: NotDone
    dry_run: bool
    tick: TickReport | None = None
    after: NotDone | None = None

    def to_json(self) -> dict[str, Any]:
        after = self.after.slots if self.after is not None else None
        return {
            "job": self.before.job,
            "period": self.before.period,
            "dry_run": self.dry_run,
            "closes_at": self.before.closes_at.isoformat(),
            "not_done": self.before.total,
            "slots": [
                {
                    "slot": slot,
                    "not_done": count,
                    **({} if after is None else {"still_not_done": after.get(slot, 0)}),
                }
                for slot, count in self.before.slots.items()
            ],
            "done": self.tick.done if self.tick is not None else 0,
            "failed": self.tick.failed if self.tick is not None else 0,
            "still_not_done": self.after.total if self.after is not None else self.before.total,
        }


def check_backfill(store: Store, job: SlotJob, period_key: str, now: datetime) -> tuple[Period, NotDone]:
    """The period a backfill may run and its not-done records; ``InvalidInput`` when it may not.

    Refused: a key that is not a period of the job, a period before the job's ``start``, and a
    period that is not closed for good yet (the schedule may still run its records: a backfill then
    would race it).
    """
    period = job.scheme.period_for_key(period_key)
    if job.start is not None and period.start < job.scheme.period_of(job.start).start:
        raise InvalidInput(
            f"period {period.key} is before job {job.name!r} starts ({job.start.isoformat()}); "
            "it has no records to backfill"
        )
    found = not_done(store, job, period, now)
    if not found.closed:
        raise InvalidInput(
            f"period {period.key} of job {job.name!r} is not closed: ticks can still take its records "
            f"until {found.closes_at.isoformat()} (the backlog's reach); backfill it after that, or run a "
            f"tick now with vardiya tick {job.name} --at TIME"
        )
    return period, found


def _last_window_start(job: SlotJob, period: Period) -> datetime:
    """The start of the period's last window that exists: its tick has every other slot as backlog."""
    scheme = job.scheme_for(period)
    for index in reversed(range(scheme.slots)):
        window = scheme.window(period, scheme.slot_at_window(index))
        if window.exists:
            return window.start
    raise InvalidInput(f"period {period.key} of job {job.name!r} has no window that exists")  # pragma: no cover


def backfill(
    store: Store, job: SlotJob, period_key: str, *, dry_run: bool = False,
    clock: Clock | None = None, timer: Clock | None = None,
) -> BackfillReport:
    """Run (or with ``dry_run`` only count) the not-done records of a closed period of ``job``."""
    now = (clock or store.clock).now()
    period, before = check_backfill(store, job, period_key, now)
    if dry_run or not before.total:
        return BackfillReport(before=before, dry_run=dry_run)
    sweep = replace(
        job, current_limit=None, backfill_limit=_NO_CAP, catch_up=0, deadline=_NO_DEADLINE,
        deadline_fraction=None, max_attempts=_NO_CAP
    )
    tick = run_tick(store, sweep, _last_window_start(job, period), clock=clock, timer=timer, within_window=False)
    return BackfillReport(before=before, dry_run=False, tick=tick, after=not_done(store, job, period, now))
