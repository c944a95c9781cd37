"""Four real processes mark the same records of one (job, period) at once, in different orders."""

from __future__ import annotations

import sqlalchemy as sa

from vardiya.store import LedgerStatus, open_store
from vardiya.store.schema import ledger

from ..support.processes import run_racing
from ..support.workers import mark_shuffled

RECORDS = 5_000


def test_overlapping_marks_keep_one_row_per_record(store_url: str) -> None:
    # two processes mark every record done, two mark it failed: whatever the interleaving, done wins
    statuses = ["failed", "done", "failed", "done"]
    reports = run_racing(
        mark_shuffled,
        [(store_url, "billing", "2026-12-01", RECORDS, 250, status, seed) for seed, status in enumerate(statuses)],
        timeout=120,
    )

    assert reports == [RECORDS] * 4
    with open_store(store_url) as store:
        with store.engine.connect() as connection:
            rows = connection.execute(sa.select(sa.func.count()).select_from(ledger)).scalar_one()
            attempts = dict(
                connection.execute(sa.select(ledger.c.attempts, sa.func.count()).group_by(ledger.c.attempts)).all()
            )
            records = set(connection.execute(sa.select(ledger.c.record)).scalars())
        assert rows == RECORDS
        assert attempts == {4: RECORDS}
        assert records == {str(r) for r in range(1, RECORDS + 1)}
        assert store.ledger.counts("billing", "2026-12-01") == {LedgerStatus.DONE: RECORDS, LedgerStatus.FAILED: 0}
