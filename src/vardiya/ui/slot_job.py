"""A slot job's page and its ``/api/slots/JOB`` document: the shown period's and the one before's ledger
by slot (``slots report --json`` each, and its chart), the job's ``status`` entry, the not-done records
of its closed periods and its next ticks.

The next ticks are the scheduler's own: ``TickSchedule.upcoming`` (the code ``next_after`` and the
scheduler's planning use), from where the scheduler's cursor or the store clock's now is, whichever
is later, exactly as ``status``'s ``next_tick`` is found. Nothing here reads the system clock.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..app import App
from ..errors import InvalidInput
from ..schedule.plan import TickSchedule
from ..slots.report import LedgerReport
from ..store import Store
from . import reports

__all__ = ["NEXT_TICKS", "NEXT_TICKS_MAX", "next_ticks", "slot_job_document", "slot_job_view"]

#: How many next ticks a job's page lists.
NEXT_TICKS = 5
#: The most next ticks the API lists.
NEXT_TICKS_MAX = 100


def next_ticks(app: App | None, job_name: str, now: datetime, through: datetime | None, count: int = NEXT_TICKS) -> list[dict[str, Any]]:
    """The job's next ``count`` planned ticks after ``max(through, now)``: each tick's planned time in the
    job's zone and in UTC, its period and its slot."""
    if not 1 <= count <= NEXT_TICKS_MAX:
        raise InvalidInput(f"ticks must be from 1 to {NEXT_TICKS_MAX}, got {count}")
    if app is None:
        raise InvalidInput("the dashboard was started without --app, so it knows no slot jobs")
    schedule = TickSchedule(app.get_slot_job(job_name))
    start = max(through, now) if through is not None else now
    return [
        {
            "planned_at": tick.planned_time.isoformat(), "planned_at_utc": tick.planned_time.astimezone(UTC).isoformat(),
            "period": tick.period.key, "slot": tick.slot,
        }
        for tick in schedule.upcoming(start, count)
    ]


def slot_job_document(
    store: Store, app: App | None, job_name: str, status: dict[str, Any], *, period: str | None = None,
    ticks: int = NEXT_TICKS,
) -> dict[str, Any]:
    """Everything a job's page shows, from ``status`` (``vardiya status --json``, already read): the job's
    entry, ``periods`` (the shown period, the current one unless ``period`` says, then the one before
    it, each ``slots report --json``), the not-done records of its closed periods and ``next_ticks``."""
    return slot_job_view(store, app, job_name, status, period=period, ticks=ticks)[0]


def slot_job_view(
    store: Store, app: App | None, job_name: str, status: dict[str, Any], *, period: str | None = None,
    ticks: int = NEXT_TICKS,
) -> tuple[dict[str, Any], list[LedgerReport]]:
    """``slot_job_document`` and the ledger reports of its periods (for their charts)."""
    if app is None or job_name not in app.slot_jobs:
        raise InvalidInput(f"no slot job {job_name!r} in the dashboard's app")
    job = app.get_slot_job(job_name)
    now = store.clock.now()
    entry = next((each for each in status["jobs"] if each["job"] == job_name), None)
    current = entry["period"] if entry else job.scheme_at(now).period_of(now).key
    shown = job.scheme.period_for_key(period or current)  # a bad key is refused before the store is read
    previous = job.scheme.period_after(shown, -1)
    found = [reports.slot_report(store, app, job_name, shown.key), reports.slot_report(store, app, job_name, previous.key)]
    roles = ["current" if shown.key == current else "shown", "previous"]
    through_text = entry["planned_through"] if entry else None
    through = datetime.fromisoformat(through_text) if through_text else None
    document = {
        "job": job_name,
        "tz": job.scheme.tz,
        "current_period": current,
        "status": entry,
        "periods": [{"role": role, "report": report.to_json()} for role, report in zip(roles, found, strict=True)],
        "next_period": job.scheme.period_after(shown, 1).key,
        "not_done": [each for each in status["not_done"] if each["job"] == job_name],
        "next_ticks": next_ticks(app, job_name, now, through, ticks),
    }
    return document, found
