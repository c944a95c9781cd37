"""Worker functions that integration tests run in real (spawned) processes.

Each opens its own store with the system clock, waits at the start barrier so all processes race for
real, and reports through its end of a Pipe: ``("ok", value)`` or ``("error", traceback text)``.
"""

from __future__ import annotations

import random
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from typing import Any

from vardiya.store import LedgerEntry, LedgerStatus, open_store

#: How long a worker waits at the start barrier for its siblings to spawn.
START_TIMEOUT_S = 120.0


def _report(conn: Connection, work: Callable[[], Any]) -> None:
    try:
        outcome: tuple[str, Any] = ("ok", work())
    except BaseException:  # noqa: BLE001 - everything goes back to the test process
        outcome = ("error", traceback.format_exc())
    try:
        conn.send(outcome)
    finally:
        conn.close()


def claim_until_empty(url: str, owner: str, batch: int, lease: float, start: Barrier, conn: Connection) -> None:
    """Loop claim(batch) -> complete_many until nothing is ready; report the ids completed."""

    def work() -> list[int]:
        completed: list[int] = []
        with open_store(url) as store:
            start.wait(START_TIMEOUT_S)
            while True:
                items = store.items.claim(batch, owner=owner, lease=lease)
                if not items:
                    return completed
                ids = [item.id for item in items]
                lost = store.items.complete_many(ids, owner=owner)
                if lost:
                    raise AssertionError(f"{owner} lost items it had just claimed: {sorted(lost)[:10]}")
                completed.extend(ids)
                # A moment of "work" per claim, as a real handler takes: it hands the core to the
                # other processes, so they all race for the same rows instead of one draining the
                # queue within its first time slice (claims alone are ~4 us an item).
                time.sleep(0.0005)

    _report(conn, work)


def mark_shuffled(
    url: str,
    job: str,
    period: str,
    count: int,
    chunk_size: int,
    status: str,
    seed: int,
    start: Barrier,
    conn: Connection,
) -> None:
    """Mark records 1..count of (job, period) with ``status``, in a shuffled order, chunk by chunk."""

    def work() -> int:
        records = list(range(1, count + 1))
        random.Random(seed).shuffle(records)
        entries = [LedgerEntry(record=record, status=LedgerStatus(status)) for record in records]
        with open_store(url) as store:
            start.wait(START_TIMEOUT_S)
            return store.ledger.mark(job, period, entries, chunk_size=chunk_size)

    _report(conn, work)


def claim_then_hang(url: str, owner: str, n: int, lease: float, conn: Connection) -> None:
    """Claim ``n`` items, tell the parent which, then hang until killed (never completes them)."""

    def work() -> list[int]:
        store = open_store(url)
        return [item.id for item in store.items.claim(n, owner=owner, lease=lease)]

    _report(conn, work)
    time.sleep(600)  # the parent SIGKILLs this process while it "works"
