"""Demo section: the scheduler and workers as a fleet would run them, on a virtual clock.

Two schedulers share one store and fire an hourly slot job's ticks; each tick is one work item however
many fire it. Then every scheduler is "down" from 09:00 to 15:30: the first one back applies the
catch-up policy (by default the latest missed tick) and counts what it passes by, and the worker's run
of that tick recovers the missed slots from the backlog. A clock stepping back an hour fires nothing
again. ``vardiya status`` closes the section.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..app import App
from ..clock import VirtualClock
from ..service.scheduler import Scheduler
from ..service.status import status_report
from ..service.worker import Worker, WorkerSettings
from ..slots.scheme import SlotScheme
from ..slots.sources import IterableSource
from ..store import LedgerStatus, Store, open_store

__all__ = ["services_section"]

DAY = datetime(2026, 12, 2, tzinfo=UTC)
HOUR = timedelta(hours=1)
METERS = 2_400


def _app() -> App:
    app = App("demo-services")

    @app.slot_job("meter_refresh", scheme=SlotScheme(slots=24), source=IterableSource(range(1, METERS + 1)))
    def refresh(meter: int) -> None:
        return None

    return app


def services_section(*, directory: Path, store: Store, clock: VirtualClock, console: Console) -> tuple[str, dict[str, Any]]:
    """Two schedulers, one worker, an outage and a clock step, on the demo's store."""
    console.print("\n[bold]6. Services[/]: `vardiya scheduler` ×2 and `vardiya worker` on one store, an outage, a clock step")
    app = _app()
    own = VirtualClock(DAY + HOUR * 6)
    # The schedulers' warnings (ticks passed by, the clock step) are what the table below shows.
    quiet = logging.getLogger("vardiya.scheduler")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        return _run(app, own, store, console)
    finally:
        quiet.setLevel(level)


def _run(app: App, own: VirtualClock, store: Store, console: Console) -> tuple[str, dict[str, Any]]:
    with open_store(store.target.given.render_as_string(hide_password=False), clock=own) as fleet:
        def start_schedulers() -> list[Scheduler]:
            return [Scheduler(fleet, app, owner=f"scheduler-{n}", lead=timedelta(0)) for n in (1, 2)]

        schedulers = start_schedulers()
        rows: list[tuple[str, str, str]] = []

        def hour(at: datetime, note: str = "") -> None:
            own.advance(at - own.now())
            fired = [(scheduler.owner, firing.key) for scheduler in schedulers for firing in scheduler.step().fired]
            own.advance(timedelta(seconds=2))  # the worker picks it up two seconds later
            Worker(fleet, app, WorkerSettings(heartbeat=False, owner="worker-1")).run(until_idle=True)
            label = ", ".join(f"{key[11:16]} by {owner}" for owner, key in fired) or "nothing"
            rows.append((f"{at:%H:%M}", label, note))

        for number in range(6, 10):
            hour(DAY + HOUR * number, "both schedulers stepped")
        schedulers = start_schedulers()  # both were down from 09:00 and start again at 15:30
        hour(DAY + HOUR * 15 + timedelta(minutes=30), "back after an outage from 09:00")
        stepped = own.now()
        own.set(stepped - HOUR)  # the clock steps back an hour
        refired = sum(len(scheduler.step().fired) for scheduler in schedulers)
        own.set(stepped)
        hour(DAY + HOUR * 16, "after the clock stepped back an hour and forward again")
        table = Table(title="what the schedulers fired (UTC)")
        for column in ("at", "fired", "note"):
            table.add_column(column)
        for row in rows:
            table.add_row(*row)
        console.print(table)
        state = fleet.schedules.get("tick:meter_refresh")
        assert state is not None
        ticks = fleet.items.list(kind="tick:meter_refresh", limit=1_000)
        catch_up = next(item for item in ticks if item.key.startswith("2026-12-02T15"))
        done = fleet.ledger.counts("meter_refresh", "2026-12-02")[LedgerStatus.DONE]
        console.print(
            f"{len(ticks)} tick items for {state.fired} firings by 2 schedulers; the outage's "
            f"{state.skipped} missed ticks were passed by (catch-up policy: the latest fires), and the 15:00 "
            f"tick's backlog took their slots: {catch_up.result['backlog']} meters recovered, "
            f"{done} of {METERS} done for 2026-12-02 by 16:00; the clock stepping back refired {refired}"
        )
        report = status_report(fleet, app)
        job, ticks_now = report["jobs"][0], report["items"]["tick"]
        console.print(
            f"vardiya status (ticks): due {ticks_now['due']}, late {ticks_now['late']}, dead {ticks_now['dead']}, "
            f"succeeded {ticks_now['succeeded']}; next tick {job['next_tick'][11:16]}, "
            f"start lateness p50 {job['lateness_p50_s']:.0f} s (the worker came 2 s after each firing)"
        )
    return "services", {
        "ticks": len(ticks), "fired": state.fired, "skipped": state.skipped, "refired": refired,
        "backlog": catch_up.result["backlog"], "done": done, "tick_dead": ticks_now["dead"],
    }
