"""The invocation metrics from SQL aggregates equal the ones the item-by-item reading computed.

``store_metrics`` used to read every item and every logged call and add them up in Python; it now asks
the store for SQL aggregates (``store/handler_figures.py``). ``_item_by_item`` below is that former
computation, kept as the oracle: on each backend, after real runs (retried and dead async calls, stream
batches under two policies, sync calls) whose busy times and finish times are then scattered to
arbitrary values, both give the same JSON document, field for field and type for type (the float sums
to the last bit but one: see ``_same``).
"""

from __future__ import annotations

import json
import math
import random
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from tests.support.invocation import outcomes, records, workload_app
from vardiya.clock import VirtualClock
from vardiya.invoke.handlers import Handler, Model
from vardiya.invoke.invoker import Invoker
from vardiya.invoke.metrics import Prices, store_metrics
from vardiya.rules.calls import CallOutcome
from vardiya.service.worker import Worker, WorkerSettings
from vardiya.store import ItemState, Store
from vardiya.store.schema import invocation_calls, work_items
from vardiya.store.streams import epoch_ms

N = 300
TABLE = outcomes(N, poison_every=37, transient_every=7)


def _percentile(values: list[int], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[max(1, math.ceil(share * len(ordered))) - 1])


def _item_by_item(store: Store, handler: Handler, since: datetime | None, prices: Prices | None) -> dict[str, Any]:
    """The metrics as they were computed before the SQL aggregates: every row read and added up here."""
    stream = handler.model is Model.STREAM
    kind = handler.batch_kind if stream else handler.call_kind
    items = store.items.figures(kind, since=since)
    q = invocation_calls.c
    with store.reading() as connection:
        calls = connection.execute(
            sa.select(q.records, q.busy_ms, q.outcome).where(q.item_id.in_([row.id for row in items]), q.records > 0)
        ).all()
    told = [row.busy_ms for row in items if row.busy_ms is not None]
    unique = dead = co_failed = 0
    latencies: list[int] = []
    for row in items:
        finished = row.state in (ItemState.SUCCEEDED, ItemState.DEAD)
        done_ms = epoch_ms(row.updated_at)
        if stream:
            payload = row.payload or {}
            unique += payload.get("size", len(payload.get("records", ())))
            latencies.extend(finished_ms - arrived for arrived, finished_ms in payload.get("completed", ()))
            if finished:
                latencies.extend(done_ms - record[3] for record in payload.get("records", ()))
            if row.state is ItemState.DEAD:
                dead += len(payload.get("records", ()))
                co_failed += int((row.result or {}).get("co_failed", 0))
        else:
            unique += 1
            if finished:
                latencies.append(done_ms - epoch_ms(row.created_at))
            if row.state is ItemState.DEAD:
                dead += 1
    busy = sum(call.busy_ms for call in calls) + sum(told)
    count = len(calls) + len(told)
    return {
        "handler": handler.name,
        "model": handler.model.value,
        "calls": count,
        "processed": sum(call.records for call in calls) + len(told),
        "unique": unique,
        "dead_letter": dead,
        "co_failed": co_failed,
        "caller_wait_ms": None,
        "completion_mean_ms": sum(latencies) / len(latencies) if latencies else 0.0,
        "completion_p99_ms": _percentile(latencies, 0.99),
        "busy_ms": busy,
        "cost": (prices or Prices()).cost(count, busy),
        "fits_limit": all(call.outcome != CallOutcome.TIMED_OUT.value for call in calls),
        "failed_calls": sum(1 for call in calls if call.outcome != CallOutcome.SUCCEEDED.value),
        "caller_errors": 0,
        "extra": sum(call.records for call in calls) + len(told) - unique,
    }


def _scatter(store: Store, seed: int) -> None:
    """Give every busy time an arbitrary float and every finish an arbitrary later microsecond."""
    rng = random.Random(seed)
    w, q = work_items.c, invocation_calls.c
    with store.reading() as connection:
        items = connection.execute(sa.select(w.id, w.busy_ms, w.updated_at)).all()
        calls = connection.execute(sa.select(q.id)).all()
    with store.transaction() as connection:
        for item_id, busy, updated in items:
            values: dict[str, Any] = {"updated_at": updated + timedelta(microseconds=rng.randrange(0, 9_000_000))}
            if busy is not None:
                values["busy_ms"] = rng.uniform(0.01, 250.0)
            connection.execute(sa.update(work_items).where(w.id == item_id).values(**values))
        for (call_id,) in calls:
            connection.execute(
                sa.update(invocation_calls).where(q.id == call_id).values(busy_ms=rng.uniform(0.01, 900.0))
            )


def _same(store: Store, handler: Handler, *, since: datetime | None = None, prices: Prices | None = None) -> None:
    new = store_metrics(store, handler, since=since, prices=prices).to_json()
    old = _item_by_item(store, handler, since, prices)
    # Sums of floats depend on the order they are added in, which neither way fixes (the old one added
    # in the order the database returned rows: on PostgreSQL its heap and plan order), so busy_ms and
    # cost may differ in the last bit; they must agree to 1e-12 and be of the same type. Every other
    # field is compared in its printed form, so an int 0 against a float 0.0 shows as a difference too.
    for field in ("busy_ms", "cost"):
        assert type(new[field]) is type(old[field]), field
        assert math.isclose(new.pop(field), old.pop(field), rel_tol=1e-12, abs_tol=0.0), field
    assert json.dumps(new, sort_keys=True) == json.dumps(old, sort_keys=True)


def test_sql_metrics_equal_the_item_by_item_ones(store: Store, clock: VirtualClock) -> None:
    app, _ = workload_app(TABLE, batch_size=20)
    invoker = Invoker(store, app)
    empty = {name: store_metrics(store, app.get_handler(name)).to_json() for name in ("v_async", "v_bisect")}
    invoker.submit_many("v_async", records(N // 2))
    invoker.append_many("v_retry_batch", records(N))
    invoker.append_many("v_report_failures", records(N))
    invoker.call("v_sync", {"id": 1})
    middle = clock.now()
    clock.advance(timedelta(seconds=5))
    invoker.submit_many("v_async", [{"id": i} for i in range(N // 2 + 1, N + 1)])
    Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    _scatter(store, seed=17)

    for name in ("v_async", "v_retry_batch", "v_report_failures", "v_bisect"):
        _same(store, app.get_handler(name))
        _same(store, app.get_handler(name), since=middle)
        _same(store, app.get_handler(name), prices=Prices(per_call=0.25, per_ms=0.001))
    # a sync handler leaves nothing in the store: its async and stream work is empty on both ways
    _same(store, app.get_handler("v_sync").with_model("async"))
    _same(store, app.get_handler("v_sync").with_model("stream"))
    async_metrics = store_metrics(store, app.get_handler("v_async"))
    assert async_metrics.dead_letter > 0 and async_metrics.failed_calls > async_metrics.dead_letter
    assert async_metrics.unique == N and isinstance(async_metrics.busy_ms, float)
    batches = store_metrics(store, app.get_handler("v_retry_batch"))
    assert batches.dead_letter > 0 and batches.co_failed > 0 and batches.completion_p99_ms > 0
    # before any work: zero figures, and the integer 0 busy time a sum of nothing is
    assert empty["v_async"]["busy_ms"] == 0 and isinstance(empty["v_async"]["busy_ms"], int)
    assert empty["v_bisect"]["calls"] == 0


def test_completion_latency_floors_each_time_to_whole_milliseconds(store: Store) -> None:
    """At the millisecond boundaries, across days, and for an updated time before the created one, the
    SQL latency (PostgreSQL's float8 form included) is ``epoch_ms(updated) - epoch_ms(created)``."""
    base = datetime(2026, 12, 4, 23, 59, 59, 999_999).astimezone()
    rng = random.Random(4)
    pairs = [
        (base, base + timedelta(microseconds=1)),  # 0.000001 s later, but in the next millisecond
        (base + timedelta(microseconds=1), base + timedelta(microseconds=1_000)),  # 999 µs, same ms + 1
        (base, base + timedelta(microseconds=999)),
        (base, base + timedelta(days=40, microseconds=1_001)),
        (base, base - timedelta(microseconds=1)),  # a clock step back: a negative latency, floored
        (base, base - timedelta(milliseconds=3, microseconds=500)),
    ] + [
        (created, created + timedelta(microseconds=rng.randrange(-2_000_000, 90_000_000_000)))
        for created in (base + timedelta(microseconds=rng.randrange(0, 10**12)) for _ in range(200))
    ]
    assert store.items.enqueue_many("call:edges", [(f"e{n}", {"n": n}) for n in range(len(pairs))]) == len(pairs)
    w = work_items.c
    with store.transaction() as connection:
        for number, (created, updated) in enumerate(pairs):
            connection.execute(
                sa.update(work_items).where(w.key == f"e{number}")
                .values(state=ItemState.SUCCEEDED, created_at=created, updated_at=updated)
            )
    latencies = sorted(epoch_ms(updated) - epoch_ms(created) for created, updated in pairs)
    totals = store.invocations.item_totals("call:edges")
    assert totals.finished == len(pairs)
    assert totals.latency_sum_ms == sum(latencies)
    assert totals.latency_p99_ms == int(_percentile(latencies, 0.99))
    assert latencies[:2] == sorted(epoch_ms(u) - epoch_ms(c) for c, u in pairs[4:6])  # the negatives
    assert {epoch_ms(u) - epoch_ms(c) for c, u in pairs[:3]} == {1, 0}
