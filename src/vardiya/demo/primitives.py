"""Demo section: the durable primitives at work (work items, retries, dead letters, ledger, dedup)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..clock import VirtualClock
from ..store import ItemState, LedgerEntry, LedgerStatus, Store

__all__ = ["primitives_section"]

KIND = "demo.validate"
READINGS = 200
#: Readings that fail their first attempt and pass the second, and readings that never pass.
TRANSIENT = frozenset(range(7, READINGS, 23))
POISON = frozenset({42, 137})
RETRY_WAIT = timedelta(seconds=60)


def _validate(reading: int, attempt: int) -> None:
    if reading in POISON:
        raise ValueError(f"reading {reading}: meter index went backwards")
    if reading in TRANSIENT and attempt == 1:
        raise TimeoutError(f"reading {reading}: validation service timed out")


def primitives_section(*, directory: Path, store: Store, clock: VirtualClock, console: Console) -> tuple[str, dict[str, Any]]:
    """Enqueue readings, let a worker claim them in batches, retry transient failures, dead-letter poison."""
    console.print("\n[bold]1. Durable primitives[/]: work items, retries, dead letters, the ledger, dedup")
    added = store.items.enqueue_many(
        KIND, ((f"reading-{n}", {"reading": n}) for n in range(1, READINGS + 1)), max_attempts=3
    )
    again = store.items.enqueue_many(KIND, ((f"reading-{n}", {"reading": n}) for n in range(1, 51)))
    console.print(f"enqueued {added} readings; enqueueing 50 of them again added {again} (idempotent per key)")

    owner = "demo-worker-1"
    rounds = []
    period = clock.now().date().isoformat()
    while True:
        batch = store.items.claim(50, owner=owner, lease=30, kinds=[KIND])
        if not batch:
            waiting = store.items.counts(kind=KIND)[ItemState.FAILED]
            if not waiting:
                break
            clock.advance(RETRY_WAIT)  # nothing ready: wait (virtually) for the retries to come due
            continue
        done, failed = [], 0
        for item in batch:
            reading = item.payload["reading"]
            try:
                _validate(reading, item.attempts)
            except Exception as error:  # noqa: BLE001 - the demo records any handler error
                failed += 1
                store.items.fail(item.id, owner=owner, error=str(error), retry_at=clock.now() + RETRY_WAIT)
                store.ledger.mark(KIND, period, [LedgerEntry(record=reading, status=LedgerStatus.FAILED, error=str(error))])
            else:
                done.append(item)
        store.items.complete_many([item.id for item in done], owner=owner)
        store.ledger.mark(
            KIND,
            period,
            [LedgerEntry(record=item.payload["reading"], status=LedgerStatus.DONE, duration_ms=4.0) for item in done],
        )
        rounds.append((clock.now().strftime("%H:%M:%S"), len(batch), len(done), failed))

    table = Table(title="worker rounds (virtual clock)")
    for column in ("time", "claimed", "succeeded", "failed"):
        table.add_column(column, justify="right")
    for row in rounds:
        table.add_row(*(str(value) for value in row))
    console.print(table)

    counts = store.items.counts(kind=KIND)
    dead = store.items.list(state=ItemState.DEAD, kind=KIND)
    dead_table = Table(title="dead letters, with their attempt history")
    for column in ("item", "payload", "attempt", "outcome", "error"):
        dead_table.add_column(column)
    for item in dead:
        for attempt in store.items.history(item.id):
            dead_table.add_row(item.key, str(item.payload), str(attempt.attempt), attempt.outcome.value, attempt.error or "")
    console.print(dead_table)

    ledger_counts = store.ledger.counts(KIND, period)
    first = store.dedup.check("demo.dedup", "reading-1", window=timedelta(hours=24))
    second = store.dedup.check("demo.dedup", "reading-1", window=timedelta(hours=24))
    console.print(
        f"states: {counts[ItemState.SUCCEEDED]} succeeded, {counts[ItemState.DEAD]} dead; "
        f"ledger {period}: {ledger_counts[LedgerStatus.DONE]} done, {ledger_counts[LedgerStatus.FAILED]} failed; "
        f"dedup: first call {'ran' if first is None else 'was a duplicate'}, "
        f"second {'was a duplicate' if second is not None else 'ran'}"
    )
    figures = {
        "enqueued": added,
        "re_enqueued": again,
        "succeeded": counts[ItemState.SUCCEEDED],
        "dead": counts[ItemState.DEAD],
        "retried": len(TRANSIENT) + len(POISON),
        "ledger_done": ledger_counts[LedgerStatus.DONE],
        "ledger_failed": ledger_counts[LedgerStatus.FAILED],
        "duplicate_detected": second is not None,
    }
    return "primitives", figures
