"""A successful async call is told by its item (busy time), not by a call-log row (migration 0006).

The metrics count it all the same (calls, processed, busy time), a failed attempt before it keeps its
call-log row, and downgrading to revision 0005 gives the call log back every such call.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from tests.support.migrations import at_revision
from vardiya.app import App
from vardiya.clock import VirtualClock
from vardiya.invoke.invoker import Invoker
from vardiya.invoke.retry import FixedWait, RetryPolicy
from vardiya.service.worker import Worker, WorkerSettings
from vardiya.store import ItemState, Store
from vardiya.store.migrate import head_revision, read_version
from vardiya.store.schema import invocation_calls, work_items


def _app(clock: VirtualClock, *, fail_first: set[int] = frozenset()) -> App:  # type: ignore[assignment]
    app = App("busy")
    seen: dict[int, int] = {}

    def check(record: Any, context: Any) -> dict[str, Any]:
        seen[record["n"]] = seen.get(record["n"], 0) + 1
        clock.advance(0.040 if record["n"] % 2 else 0.010)  # the handler's busy time, on the virtual clock
        if record["n"] in fail_first and seen[record["n"]] == 1:
            raise RuntimeError(f"reading {record['n']} is not there yet")
        return {"n": record["n"], "ok": True}

    app.handler("check", model="async", retry=RetryPolicy(max_attempts=3, wait=FixedWait(seconds=1)))(check)
    return app


def _calls(store: Store) -> list[Any]:
    q = invocation_calls.c
    with store.reading() as connection:
        return connection.execute(sa.select(q.item_id, q.attempt, q.busy_ms, q.outcome).order_by(q.id)).all()


def _busy(store: Store) -> dict[int, float | None]:
    w = work_items.c
    with store.reading() as connection:
        return dict(connection.execute(sa.select(w.id, w.busy_ms).order_by(w.id)).all())


def test_a_successful_async_call_writes_its_busy_time_on_the_item_and_no_call_row(
    store: Store, clock: VirtualClock
) -> None:
    app = _app(clock)
    invoker = Invoker(store, app)
    handles = invoker.submit_many("check", [{"n": n} for n in range(1, 7)])
    Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)

    assert _calls(store) == []
    assert _busy(store) == {h.id: pytest.approx(40.0 if n % 2 else 10.0) for n, h in enumerate(handles, 1)}
    assert invoker.status(handles[0]).result == {"n": 1, "ok": True}  # the result is stored beside it
    metrics = invoker.metrics("check")
    assert (metrics.calls, metrics.processed, metrics.unique, metrics.failed_calls) == (6, 6, 6, 0)
    assert metrics.busy_ms == pytest.approx(3 * 40 + 3 * 10)


def test_a_failed_attempt_keeps_its_call_row_and_the_retry_that_succeeds_is_on_the_item(
    store: Store, clock: VirtualClock
) -> None:
    app = _app(clock, fail_first={2})
    invoker = Invoker(store, app)
    handles = invoker.submit_many("check", [{"n": n} for n in range(1, 4)])
    Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)

    second = handles[1].id
    assert [(row.item_id, row.attempt, row.outcome) for row in _calls(store)] == [(second, 1, "failed")]
    assert _calls(store)[0].busy_ms == pytest.approx(10.0)
    assert invoker.status(handles[1]).state is ItemState.SUCCEEDED
    assert _busy(store)[second] == pytest.approx(10.0)
    metrics = invoker.metrics("check")
    assert (metrics.calls, metrics.processed, metrics.unique, metrics.failed_calls) == (4, 4, 3, 1)
    assert metrics.busy_ms == pytest.approx(40 + 10 + 10 + 40)


def test_downgrading_to_0005_writes_the_calls_told_by_items_into_the_call_log(store: Store, clock: VirtualClock) -> None:
    app = _app(clock, fail_first={1})
    invoker = Invoker(store, app)
    handles = invoker.submit_many("check", [{"n": n} for n in range(1, 4)])
    Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    before = invoker.metrics("check")
    w = work_items.c
    with store.reading() as connection:
        ended = dict(connection.execute(sa.select(w.id, w.updated_at)).all())

    with at_revision(store, "0005") as connection:
        columns = {column["name"] for column in sa.inspect(connection).get_columns("work_items")}
        assert "busy_ms" not in columns
        rows = connection.execute(
            sa.select(invocation_calls).where(invocation_calls.c.outcome == "succeeded").order_by(invocation_calls.c.item_id)
        ).all()

    assert [(row.handler, row.item_id, row.attempt, row.records, row.failed) for row in rows] == [
        ("check", handles[0].id, 2, 1, 0), ("check", handles[1].id, 1, 1, 0), ("check", handles[2].id, 1, 1, 0)
    ]
    for row in rows:
        assert row.busy_ms == pytest.approx(40.0 if row.item_id != handles[1].id else 10.0)
        assert abs((row.ended_at - ended[row.item_id]).total_seconds()) < 1e-3
        assert abs((row.ended_at - row.started_at).total_seconds() * 1000 - row.busy_ms) < 1.0
    # what revision 0005 counted from the call log alone is what the item busy times count now
    failed = [row for row in _calls(store) if row.outcome == "failed"]
    assert len(rows) + len(failed) == before.calls
    assert sum(row.busy_ms for row in rows) + sum(row.busy_ms for row in failed) == pytest.approx(before.busy_ms)
    with store.engine.connect() as connection:
        assert read_version(connection).current == head_revision()
