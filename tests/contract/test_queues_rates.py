"""Named queues and shared rate limits, on both backends.

- A worker of some queues never claims another queue's items (async calls and stream batches), and
  ``until_idle`` ends when its own queues are empty, whatever waits in the others.
- Rate limits are one token bucket per handler in the store: several owners claiming on the virtual
  clock together start no more than rate x time + burst items, and the items over the limit stay ready.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from vardiya.app import App
from vardiya.clock import VirtualClock
from vardiya.errors import InvalidInput
from vardiya.invoke.invoker import Invoker
from vardiya.invoke.rate_limits import claim_limits
from vardiya.service.worker import Worker, WorkerSettings
from vardiya.store import ItemState, Store
from vardiya.store.schema import work_items


def _queued_app(seen: list[str]) -> App:
    app = App("queues")

    @app.handler("reports", queue="slow")
    def reports(record: Any, context: Any) -> Any:
        seen.append(f"reports:{record['n']}")
        return record["n"]

    @app.handler("mail", queue="fast")
    def mail(record: Any, context: Any) -> Any:
        seen.append(f"mail:{record['n']}")
        return record["n"]

    @app.handler("plain")
    def plain(record: Any, context: Any) -> Any:
        seen.append(f"plain:{record['n']}")

    @app.handler("readings", model="stream", queue="fast", batch_size=5)
    def readings(record: Any, context: Any) -> Any:
        seen.append(f"readings:{record['n']}")

    return app


def _queues(store: Store) -> dict[str, set[str]]:
    c = work_items.c
    with store.reading() as connection:
        rows = connection.execute(sa.select(c.kind, c.queue)).all()
    found: dict[str, set[str]] = {}
    for kind, queue in rows:
        found.setdefault(queue, set()).add(kind)
    return found


def test_a_worker_of_a_queue_never_claims_another_queues_items(store: Store) -> None:
    seen: list[str] = []
    app = _queued_app(seen)
    invoker = Invoker(store, app)
    invoker.submit_many("reports", [{"n": n} for n in range(10)])
    invoker.submit_many("mail", [{"n": n} for n in range(10)])
    invoker.submit_many("plain", [{"n": n} for n in range(3)])
    invoker.append_many("readings", [{"n": n} for n in range(12)])

    fast = Worker(store, app, WorkerSettings(heartbeat=False, queues=["fast"])).run(until_idle=True)
    assert sorted(seen) == sorted([f"mail:{n}" for n in range(10)] + [f"readings:{n}" for n in range(12)])
    assert fast.succeeded == 10 + 3  # ten calls, three batches
    assert _queues(store) == {"slow": {"call:reports"}, "fast": {"call:mail", "batch:readings"}, "default": {"call:plain"}}
    pending = store.items.list(state=ItemState.PENDING)
    assert {item.kind for item in pending} == {"call:reports", "call:plain"}

    seen.clear()
    Worker(store, app, WorkerSettings(heartbeat=False, queues=["slow", "default"])).run(until_idle=True)
    assert sorted(seen) == sorted([f"reports:{n}" for n in range(10)] + [f"plain:{n}" for n in range(3)])
    assert not store.items.list(state=ItemState.PENDING)


def test_a_worker_without_queues_claims_every_queue(store: Store) -> None:
    seen: list[str] = []
    app = _queued_app(seen)
    invoker = Invoker(store, app)
    handles = [invoker.submit("reports", {"n": 1}), invoker.submit("mail", {"n": 2}), invoker.submit("plain", {"n": 3})]
    Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    assert [handle.result(timeout=0) for handle in handles] == [1, 2, None]


def test_claims_by_queue_at_the_store(store: Store) -> None:
    store.items.enqueue_texts_ids("call:x", [("a", '{"n": 1}')], queue="one")
    store.items.enqueue_texts_ids("call:x", [("b", '{"n": 2}')], queue="two")
    store.items.enqueue("call:x", {"n": 3}, key="c")  # the default queue
    assert [item.key for item in store.items.claim(10, owner="w", lease=30, queues=["two"])] == ["b"]
    assert [item.key for item in store.items.claim(10, owner="w", lease=30, kinds=["call:x"], queues=["one"])] == ["a"]
    assert store.items.claim(10, owner="w", lease=30, queues=["nobody"]) == []
    assert [item.key for item in store.items.claim(10, owner="w", lease=30)] == ["c"]


def test_bad_queue_names_are_refused_before_anything_is_written(store: Store) -> None:
    with pytest.raises(InvalidInput, match="a queue name"):
        store.items.enqueue_texts_ids("call:x", [("a", "{}")], queue="with space")
    with pytest.raises(InvalidInput, match="a queue name"):
        Worker(store, _queued_app([]), WorkerSettings(queues=["ok", ""]))
    with pytest.raises(InvalidInput, match="list of queue names"):
        Worker(store, _queued_app([]), WorkerSettings(queues="fast"))
    assert store.items.list() == []


def _limited_app(rate: str) -> App:
    app = App("rates")

    @app.handler("ping", rate_limit=rate)
    def ping(record: Any, context: Any) -> Any:
        return record["n"]

    @app.handler("free")
    def free(record: Any, context: Any) -> Any:
        return record["n"]

    return app


def test_three_owners_together_stay_within_the_rate(store: Store, clock: VirtualClock) -> None:
    """5/s with a burst of 5, three owners claiming every 50 ms of virtual time for 10 s: at most 55."""
    app = _limited_app("5/s")
    invoker = Invoker(store, app)
    invoker.submit_many("ping", [{"n": n} for n in range(300)])
    invoker.submit_many("free", [{"n": n} for n in range(40)])
    limits = claim_limits(app.handlers.values())
    kinds = ["call:free", "call:ping"]
    started: dict[str, int] = {"call:ping": 0, "call:free": 0}
    for _step in range(200):  # 200 x 50 ms = 10 s
        for owner in ("w1", "w2", "w3"):
            items = store.items.claim(100, owner=owner, lease=30, kinds=kinds, limits=limits)
            for item in items:
                started[item.kind] += 1
            store.items.complete_many([item.id for item in items], owner=owner)
        clock.advance(0.05)
    assert started["call:free"] == 40  # no limit: all at the first claim
    assert 50 <= started["call:ping"] <= 5 * 10 + 5, started
    waiting = [item for item in store.items.list(state=ItemState.PENDING) if item.kind == "call:ping"]
    assert len(waiting) == 300 - started["call:ping"]  # over the limit: still ready, uncharged
    assert all(item.attempts == 0 for item in waiting)


def test_a_limited_worker_drains_at_the_rate(store: Store, clock: VirtualClock) -> None:
    app = _limited_app("10/s")
    handles = Invoker(store, app).submit_many("ping", [{"n": n} for n in range(40)])
    began = clock.monotonic()
    report = Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    took = clock.monotonic() - began
    assert report.succeeded == 40
    assert 2.9 <= took <= 4.5, took  # 10 at once (the burst), then 30 at 10 a second
    assert [handle.result(timeout=0) for handle in handles] == list(range(40))


def test_a_bucket_refills_only_to_its_burst(store: Store, clock: VirtualClock) -> None:
    app = _limited_app("4/m")
    Invoker(store, app).submit_many("ping", [{"n": n} for n in range(20)])
    limits = claim_limits(app.handlers.values())
    assert len(store.items.claim(100, owner="w", lease=30, kinds=["call:ping"], limits=limits)) == 4
    assert store.items.claim(100, owner="w", lease=30, kinds=["call:ping"], limits=limits) == []
    clock.advance(timedelta(seconds=15))
    assert len(store.items.claim(100, owner="w", lease=30, kinds=["call:ping"], limits=limits)) == 1
    clock.advance(timedelta(hours=5))  # a quiet spell fills it to 4, not to 1,200
    assert len(store.items.claim(100, owner="w", lease=30, kinds=["call:ping"], limits=limits)) == 4


def test_a_limited_claim_needs_its_kinds(store: Store) -> None:
    limits = claim_limits(_limited_app("1/s").handlers.values())
    with pytest.raises(InvalidInput, match="needs the kinds"):
        store.items.claim(10, owner="w", lease=30, limits=limits)


def test_migration_0013_keeps_items_and_their_history_both_ways(store: Store) -> None:
    """Down to 0010 and up again: every item and attempt row is kept, and the items come back in 'default'."""
    from tests.support.migrations import at_revision
    from vardiya.store.schema import attempts

    app = _queued_app([])
    Invoker(store, app).submit_many("mail", [{"n": n} for n in range(3)])
    item = store.items.claim(1, owner="w", lease=30)[0]
    store.items.fail(item.id, owner="w", error="boom", retry_at=store.clock.now())
    with at_revision(store, "0010") as connection:
        columns = {column["name"] for column in sa.inspect(connection).get_columns("work_items")}
        assert "queue" not in columns
        assert "rate_buckets" not in sa.inspect(connection).get_table_names()
        assert connection.execute(sa.select(sa.func.count()).select_from(attempts)).scalar() == 1
    assert len(store.items.list()) == 3
    assert _queues(store) == {"default": {"call:mail"}}
    assert store.items.history(item.id)[0].error == "boom"
