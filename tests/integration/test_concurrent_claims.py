"""Four real processes claim from one store at once: every item is completed once, by one of them.

Thirty thousand items in claims of 20, with a moment of "work" after each claim, keep all four busy
for long enough to share the work even when one of them starts a time slice late (claims alone are
fast: the whole queue takes one process about 0.1 s).
"""

from __future__ import annotations

import sqlalchemy as sa

from vardiya.store import AttemptOutcome, ItemState, open_store
from vardiya.store.schema import attempts as attempts_table
from vardiya.store.schema import work_items

from ..support.processes import run_racing
from ..support.workers import claim_until_empty

ITEMS = 30_000
WORKERS = 4


def test_no_item_is_held_by_two_processes(store_url: str) -> None:
    with open_store(store_url) as store:  # the system clock, like the workers
        assert store.items.enqueue_many("batch", ((f"r{i}", {"i": i}) for i in range(ITEMS))) == ITEMS
        with store.engine.connect() as connection:
            enqueued = set(connection.execute(sa.select(work_items.c.id)).scalars())

        reports = run_racing(
            claim_until_empty,
            [(store_url, f"worker-{n}", 20, 60.0) for n in range(WORKERS)],
            timeout=120,
        )

        completed = [item_id for report in reports for item_id in report]
        assert len(completed) == len(set(completed)) == ITEMS  # no id completed twice
        assert set(completed) == enqueued
        assert sum(1 for report in reports if report) >= 2, "the processes should have shared the work"
        assert store.items.counts() == {state: ITEMS if state is ItemState.SUCCEEDED else 0 for state in ItemState}
        with store.engine.connect() as connection:
            attempts = dict(
                connection.execute(
                    sa.select(work_items.c.attempts, sa.func.count()).group_by(work_items.c.attempts)
                ).all()
            )
            # No failed or expired attempt: the history table is empty and each item row tells its one
            # successful attempt (owner, times).
            history_rows = connection.execute(sa.select(sa.func.count()).select_from(attempts_table)).scalar_one()
            owners = dict(connection.execute(sa.select(work_items.c.id, work_items.c.lease_owner)).all())
        assert attempts == {1: ITEMS}
        assert history_rows == 0
        sample = sorted(enqueued)[:: ITEMS // 50]
        for item_id in sample:
            (attempt,) = store.items.history(item_id)
            assert attempt.outcome is AttemptOutcome.SUCCEEDED and attempt.attempt == 1
        for n, report in enumerate(reports):  # each attempt is recorded under the process that did it
            assert {owners[item_id] for item_id in report} <= {f"worker-{n}"}  # a process may find nothing left
