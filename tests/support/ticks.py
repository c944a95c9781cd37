"""Ticks of the nightly-users example run in a real (spawned) process, for the SIGKILL tests.

The child builds the example app itself (a job's handler is a closure and cannot be pickled), slows
the handler down to one record at a time, and tells the parent through its end of a Pipe when
``kill_after`` output files exist: ``("ok", files)``, or ``("error", traceback text)`` when the tick
failed or finished before that point. With ``hang`` it then waits inside the handler, in the middle of
a batch, to be killed; without it, it keeps working so the kill lands wherever the tick happens to be.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Mapping
from datetime import datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from vardiya.clock import SystemClock
from vardiya.examples.nightly_users import JOB, build_app
from vardiya.slots.job import SlotJob, TickContext
from vardiya.slots.runner import run_tick
from vardiya.store import open_store

#: How long a hanging child waits to be killed; far longer than any test runs.
HANG_S = 600.0
#: The killed tick's claim lease: short, so the next run may take its records soon after the kill.
CLAIM_LEASE = timedelta(seconds=1)


def output_files(out_dir: Path) -> list[Path]:
    """The published output files under ``out_dir`` (temp files of ``atomic_write`` are not ``*.json``)."""
    return sorted(path for path in out_dir.rglob("*.json") if path.is_file())


def nightly_job(users_db: Path, out_dir: Path, **changes: Any) -> SlotJob:
    """The example's job (durable writes, no scripted failures), with ``changes`` to its settings."""
    job = build_app(users_db, out_dir, durable=True, flaky=False).get_slot_job(JOB)
    return dataclasses.replace(job, **changes) if changes else job


def tick_until_killed(
    store_url: str,
    users_db: str,
    out_dir: str,
    planned_at: str,
    batch_size: int,
    flush_every: int,
    kill_after: int,
    pause_s: float,
    hang: bool,
    conn: Connection,
) -> None:
    """Run the example's tick planned for ``planned_at`` (ISO text), slowed down, until the parent kills it."""
    outputs = Path(out_dir)
    signalled = False

    def signal_parent() -> None:
        nonlocal signalled
        signalled = True
        conn.send(("ok", len(output_files(outputs))))
        if hang:
            time.sleep(HANG_S)

    try:
        job = nightly_job(
            Path(users_db), outputs, batch_size=batch_size, flush_every=flush_every, claim_lease=CLAIM_LEASE
        )
        refresh = job.handler

        def slowed(user_ids: list[int], context: TickContext) -> Mapping[int, Any]:
            # Record by record, so the kill can land between two files of one batch.
            outcomes: dict[int, Any] = {}
            for user_id in user_ids:
                outcomes.update(refresh([user_id], context))
                time.sleep(pause_s)
                if not signalled and len(output_files(outputs)) >= kill_after:
                    signal_parent()
            return outcomes

        with open_store(store_url, clock=SystemClock()) as store:
            # A past slot, run by hand: only the deadline stops it, not the end of the slot's window.
            report = run_tick(
                store, dataclasses.replace(job, handler=slowed), datetime.fromisoformat(planned_at), within_window=False
            )
        if not signalled:
            conn.send(("error", f"the tick finished before {kill_after} files existed: {report.to_json()}"))
    except BaseException:  # everything goes back to the test process
        if not signalled:
            conn.send(("error", traceback.format_exc()))
        raise
    finally:
        conn.close()
