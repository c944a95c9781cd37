"""Heartbeats of real processes (issue 17): a running scheduler and worker are alive in ``status``, a
SIGKILLed worker's row ages into "not alive" after three intervals, a SIGTERMed one's row is deleted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vardiya.store import open_store

from ..support.services import Fleet, wait_for


def _services(store: Any) -> dict[str, bool]:
    return {service.kind.value + ":" + str(service.pid): service.alive for service in store.heartbeats.all()}


def test_live_services_beat_a_killed_one_stops_being_alive_and_a_stopped_one_leaves(
    store_url: str, tmp_path: Path
) -> None:
    env = {"VT_SLOTS": "12", "VT_PERIOD_S": "12", "VT_RECORDS": "24", "VT_WORK_S": "0"}
    fleet = Fleet(store_url, tmp_path, env)
    store = open_store(store_url)
    try:
        try:
            fleet.start("scheduler", "scheduler", "--poll-max", "0.2")
            fleet.start("worker-0", "worker", "--lease", "0.6")  # a beat every 0.2 s
            fleet.start("worker-1", "worker", "--lease", "0.6")
            wait_for(
                lambda: sorted(s.kind.value for s in store.heartbeats.alive()) == ["scheduler", "worker", "worker"],
                timeout=30, what="three live services", fleet=fleet,
            )
            [scheduler] = [s for s in store.heartbeats.alive() if s.kind.value == "scheduler"]
            assert scheduler.app is not None and any(name.startswith("tick:") for name in scheduler.runs)
            before = {service.id: service.beat_at for service in store.heartbeats.all()}
            wait_for(
                lambda: all(s.beat_at > before[s.id] for s in store.heartbeats.all() if s.kind.value == "worker"),
                timeout=10, what="the workers to beat again", fleet=fleet,
            )
            fleet.kill("worker-0")
            wait_for(
                lambda: sorted(_services(store).values()) == [False, True, True],
                timeout=10, what="the killed worker to stop being alive", fleet=fleet,
            )
            assert fleet.terminate("worker-1") == 0
            assert fleet.terminate("scheduler") == 0
            left = store.heartbeats.all()
            assert [service.alive for service in left] == [False]  # only the killed worker's row is left
        finally:
            fleet.close()
    finally:
        store.close()
