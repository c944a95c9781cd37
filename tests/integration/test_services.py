"""``vardiya scheduler`` and ``vardiya worker`` as real processes on a short period (12 slots over 12 s).

Several schedulers and workers share one store while a chaos loop SIGKILLs workers and a scheduler at
random moments and restarts them. What must hold: every record is done exactly once per period in the
ledger, every planned tick was enqueued once (no tick twice, no tick lost), and every tick recorded how
late it started. A scheduler down for two periods applies the catch-up policy exactly on restart and the
backlog recovers the missed records within its limits. A data-arrival trigger starts a partition only
once its file exists, while a plain schedule that fired earlier shows up as an empty run.
"""

from __future__ import annotations

import json
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from vardiya.slots.runner import planned_ticks
from vardiya.store import ItemState, LedgerStatus, Store, open_store
from vardiya.store.schema import ledger, work_items

from ..support.cli import run_cli
from ..support.services import APP, Fleet, wait_for

pytestmark = pytest.mark.slow


def _ticks(store: Store) -> list[Any]:
    with store.reading() as connection:
        return connection.execute(
            sa.select(work_items.c.key, work_items.c.state, work_items.c.attempts, work_items.c.result)
            .where(work_items.c.kind == "tick:rolling")
            .order_by(work_items.c.key)
        ).all()


def _done_per_period(store: Store) -> dict[str, int]:
    c = ledger.c
    with store.reading() as connection:
        return dict(connection.execute(
            sa.select(c.period, sa.func.count()).where(c.job == "rolling", c.status == LedgerStatus.DONE).group_by(c.period)
        ).all())


def _planned(key: str) -> datetime:
    return datetime.strptime(key, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def _job(env: dict[str, str]) -> Any:
    """The slot job as the processes build it (the app module reads the same variables)."""
    import importlib
    import os

    previous = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        import tests.support.service_app as module

        return importlib.reload(module).app.slot_jobs["rolling"]
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _registered(store: Store, fleet: Fleet, name: str) -> bool:
    """Whether the process now running as ``name`` has registered its service row."""
    pid = fleet.processes[name].pid
    return any(service.pid == pid for service in store.heartbeats.all())


def _all_ticks_done(store: Store) -> bool:
    ticks = _ticks(store)
    return bool(ticks) and all(row.state == ItemState.SUCCEEDED for row in ticks)


@pytest.mark.parametrize(("backend", "schedulers", "workers"), [("sqlite", 1, 2), ("postgresql", 2, 3)])
def test_chaos_every_record_once_per_period_no_tick_twice_or_lost(
    store_url: str, tmp_path: Path, backend: str, schedulers: int, workers: int
) -> None:
    env = {"VT_SLOTS": "12", "VT_PERIOD_S": "12", "VT_RECORDS": "240", "VT_WORK_S": "0.004"}
    fleet = Fleet(store_url, tmp_path, env)
    store = open_store(store_url)
    try:
        rng = random.Random(20261201)
        try:
            for n in range(schedulers):
                fleet.start(f"scheduler-{n}", "scheduler", "--poll-max", "0.2")
            for n in range(workers):
                fleet.start(f"worker-{n}", "worker", "--lease", "2", "--log-format", "json")
            wait_for(lambda: bool(_ticks(store)), timeout=30, what="the first tick", fleet=fleet)
            # Chaos for three periods: kill a worker or the first scheduler, restart it a moment later.
            victims = [f"worker-{n}" for n in range(workers)] + ["scheduler-0"]
            until = time.monotonic() + 36
            while time.monotonic() < until:
                time.sleep(rng.uniform(1.0, 3.0))
                victim = rng.choice(victims)
                fleet.kill(victim)
                time.sleep(rng.uniform(0.1, 0.8))
                fleet.restart(victim)
            # Each process up, its SIGTERM handler installed, before it is asked to stop: schedulers and
            # workers register their service row (with their pid) only once they run under the handler.
            # A fixed sleep was too short for a restart on a loaded machine (no handler yet: exit -15).
            for name in [*(f"scheduler-{n}" for n in range(schedulers)), *(f"worker-{n}" for n in range(workers))]:
                wait_for(lambda name=name: _registered(store, fleet, name), timeout=60, what=f"{name} up", fleet=fleet)
            for n in range(schedulers):
                assert fleet.terminate(f"scheduler-{n}") == 0
            wait_for(lambda: _all_ticks_done(store), timeout=60, what="every fired tick to finish", fleet=fleet)
            for n in range(workers):
                assert fleet.terminate(f"worker-{n}") == 0
        finally:
            fleet.close()
        ticks = _ticks(store)
        planned = [_planned(row.key) for row in ticks]
        job = _job(env)
        expected = [moment.astimezone(UTC) for moment in planned_ticks(job, planned[0], planned[-1] + timedelta(seconds=0.5))]
        assert planned == expected, "a planned tick is missing or extra"
        assert len(planned) >= 30
        for row in ticks:
            assert row.result is not None and row.result["lateness_s"] >= 0
            assert row.result["planned_at"] == _planned(row.key).isoformat()
        # Every period whose last tick was fired is complete: each record done once (the ledger is unique).
        scheme = job.scheme
        last_slot_planned = {scheme.period_of(moment).key for moment in planned if scheme.locate(moment).slot == scheme.slots - 1}
        done = _done_per_period(store)
        assert last_slot_planned and all(done.get(period) == 240 for period in last_slot_planned), (done, last_slot_planned)
        with store.reading() as connection:
            rows = connection.execute(sa.select(sa.func.count()).select_from(ledger)).scalar_one()
            failed = connection.execute(sa.select(sa.func.count()).where(ledger.c.status == LedgerStatus.FAILED)).scalar_one()
        assert failed == 0
        assert rows == sum(done.values())
        reclaimed = sum(1 for row in ticks if row.attempts > 1)
        lateness = sorted(row.result["lateness_s"] for row in ticks)
        print(f"{len(ticks)} ticks, {fleet.kills} kills, {reclaimed} ticks reclaimed after a kill, lateness max {lateness[-1]:.3f} s")
    finally:
        store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_scheduler_down_for_two_periods_catches_up_exactly(store_url: str, tmp_path: Path, backend: str) -> None:
    env = {
        "VT_SLOTS": "6", "VT_PERIOD_S": "6", "VT_RECORDS": "60", "VT_GRACE_S": "0.5", "VT_MAX_TICKS": "1",
        "VT_CATCH_UP": "3",
    }
    fleet = Fleet(store_url, tmp_path, env)
    store = open_store(store_url)
    job = _job(env)
    try:
        fleet.start("scheduler", "scheduler", "--poll-max", "0.2")
        fleet.start("worker", "worker", "--lease", "2")
        wait_for(lambda: sum(row.state == ItemState.SUCCEEDED for row in _ticks(store)) >= 3, timeout=30, what="3 ticks", fleet=fleet)
        fleet.kill("scheduler")
        state = store.schedules.get("tick:rolling")
        assert state is not None and state.planned_through is not None
        before, skipped_before = state.planned_through, state.skipped
        time.sleep(13)  # two periods and a bit: every tick of them is missed
        fleet.restart("scheduler")
        wait_for(lambda: any(_planned(row.key) > before for row in _ticks(store)), timeout=20, what="the catch-up tick", fleet=fleet)
        after = store.schedules.get("tick:rolling")
        assert after is not None
        first = min(_planned(row.key) for row in _ticks(store) if _planned(row.key) > before)
        missed = [moment.astimezone(UTC) for moment in planned_ticks(job, before + timedelta(microseconds=1), first + timedelta(microseconds=1))]
        assert missed[-1] == first and len(missed) >= 10  # about two periods (12 ticks), less the 1 s lead
        # Exactly the latest missed tick fired; all the others were passed by, and counted.
        assert after.skipped - skipped_before == len(missed) - 1
        assert (after.skipped_from, after.skipped_to) == (missed[0], missed[-2])
        # The backlog of the catch-up tick recovers every missed record of the catch_up periods.
        first_period = job.scheme.period_of(before)
        catch_period = job.scheme.period_of(first)
        periods = []
        cursor = first_period
        while cursor.start < catch_period.start:
            periods.append(cursor.key)
            cursor = job.scheme.period_after(cursor)
        wait_for(lambda: all(_done_per_period(store).get(key) == 60 for key in periods), timeout=20,
                 what=f"periods {periods} to be complete", fleet=fleet)
        assert fleet.terminate("scheduler") == 0
        assert fleet.terminate("worker") == 0
    finally:
        fleet.close()
        store.close()


def test_data_arrival_starts_a_partition_only_once_its_data_exists(store_url: str, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    (landing / "sensed").mkdir(parents=True)
    today = datetime.now(UTC).date().isoformat()
    env = {"VT_LANDING": str(landing), "VT_DAY": today}
    fleet = Fleet(store_url, tmp_path, env)
    store = open_store(store_url)

    def task(pipeline: str, name: str) -> Any:
        from vardiya.pipeline.state import PipelineState

        return PipelineState(store, pipeline).tasks().get(name)

    try:
        fleet.start("scheduler", "scheduler", "--poll-max", "0.2")
        fleet.start("worker", "worker", "--lease", "5")
        # The hourly schedule fires at once (the latest missed tick), before any data exists.
        wait_for(lambda: task("scheduled", f"ingest@{today}") is not None and task("scheduled", f"ingest@{today}").rows == 0,
                 timeout=30, what="the scheduled (empty) run", fleet=fleet)
        time.sleep(1.0)  # several sensor checks find nothing
        assert task("sensed", "ingest@p1") is None
        (landing / "sensed" / "p1.csv").write_text("id,value\n1,10\n2,\n3,30\n", encoding="utf-8")
        landed = datetime.now(UTC)
        wait_for(lambda: task("sensed", "clean@p1") is not None and task("sensed", "clean@p1").rows == 2,
                 timeout=30, what="the sensed run of p1", fleet=fleet)
        assert task("sensed", "ingest@p1").started_at >= landed - timedelta(seconds=1)
        assert task("sensed", "ingest@p2") is None  # no data, never started
        assert fleet.terminate("scheduler") == 0
        assert fleet.terminate("worker") == 0
    finally:
        fleet.close()
        store.close()
    env_cli = {"VT_LANDING": str(landing), "VT_DAY": today}
    scheduled = run_cli("pipeline", "triggers", "scheduled", "--app", APP, "--db", store_url, "--json", cwd=tmp_path, env=env_cli)
    assert scheduled.code == 0, scheduled.stderr
    document = json.loads(scheduled.stdout)
    assert document["empty"] == [f"ingest@{today}"]
    assert document["tasks"][f"ingest@{today}"]["by_trigger"] == {"cron-1": 1}
    sensed = json.loads(run_cli("pipeline", "triggers", "sensed", "--app", APP, "--db", store_url, "--json", cwd=tmp_path, env=env_cli).stdout)
    assert sensed["empty"] == []
    assert sensed["tasks"]["ingest@p1"]["by_trigger"] == {"data-1": 1}
    assert sensed["tasks"]["ingest@p2"]["count"] == 0
