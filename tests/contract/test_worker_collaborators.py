"""The worker's collaborators on each backend: only the names chosen, the heartbeat on held items, the
drain releasing what it had not started, retries waited out in virtual time."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from vardiya.app import App
from vardiya.clock import VirtualClock
from vardiya.invoke import FixedWait, RetryPolicy
from vardiya.invoke.invoker import Invoker
from vardiya.invoke.pacing import StartPacer
from vardiya.service.worker import Worker, WorkerSettings
from vardiya.store import ItemState, Store


def _app(seen: list[tuple[str, Any]]) -> App:
    app = App("collaborators")

    @app.handler("first", model="async")
    def first(record: Any, context: Any) -> None:
        seen.append(("first", record))

    @app.handler("second", model="async")
    def second(record: Any, context: Any) -> None:
        seen.append(("second", record))

    return app


def test_a_worker_given_names_claims_only_their_items(store: Store) -> None:
    seen: list[tuple[str, Any]] = []
    app = _app(seen)
    invoker = Invoker(store, app)
    handles = [invoker.submit("first", {"n": 1}), invoker.submit("second", {"n": 2})]
    worker = Worker(store, app, WorkerSettings(heartbeat=False, names=("second",)))
    assert worker.kinds and all(kind.endswith(":second") for kind in worker.kinds)
    report = worker.run(until_idle=True)
    assert seen == [("second", {"n": 2})]
    assert report.succeeded == 1 and report.items == 1
    assert invoker.status(handles[0]).state is ItemState.PENDING
    assert invoker.status(handles[1]).state is ItemState.SUCCEEDED


def test_the_heartbeat_extends_the_lease_of_the_items_in_hand(store: Store, clock: VirtualClock) -> None:
    app = _app([])
    Invoker(store, app).submit("first", {"n": 1})
    worker = Worker(store, app, WorkerSettings(lease=timedelta(seconds=30), owner="beating"))
    (item,) = store.items.claim(1, owner="beating", lease=30, kinds=worker.kinds)
    before = store.items.get(item.id).lease_until
    clock.advance(20)
    with worker.heartbeat.holding([item.id]):
        worker.heartbeat.beat()
    after = store.items.get(item.id).lease_until
    assert before is not None and after is not None and after - before == timedelta(seconds=20)
    assert worker.heartbeat.held() == []
    assert worker.heartbeat.interval_s == 10.0


def test_a_stopped_worker_releases_what_it_had_not_started(store: Store) -> None:
    app = _app([])
    invoker = Invoker(store, app)
    for n in range(5):
        invoker.submit("first", {"n": n})
    worker = Worker(store, app, WorkerSettings(heartbeat=False, prefetch=5, owner="drain"))
    items = worker.loop.claim_invocations(StartPacer())
    assert len(items) == 5
    worker.stop()
    worker.loop.runner.run(items, StartPacer())
    assert worker.report.released == 5 and worker.report.items == 0
    assert store.items.claim(5, owner="other", lease=30, kinds=worker.kinds)  # back in the queue, claimable


def test_a_retry_is_waited_out_in_virtual_time(store: Store, clock: VirtualClock) -> None:
    app = App("retrying")
    attempts: list[int] = []

    @app.handler("flaky", model="async", retry=RetryPolicy(max_attempts=3, wait=FixedWait(seconds=600)))
    def flaky(record: Any, context: Any) -> None:
        attempts.append(1)
        if len(attempts) < 3:
            raise RuntimeError("not yet")

    handle = Invoker(store, app).submit("flaky", {"n": 1})
    started = clock.now()
    report = Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    assert len(attempts) == 3 and report.retried == 2 and report.succeeded == 1
    assert Invoker(store, app).status(handle).state is ItemState.SUCCEEDED
    # two waits of 600 s, passed by the idle wait through Clock.wait, not slept
    assert clock.now() - started >= timedelta(seconds=1200)


def test_a_slow_handlers_success_is_recorded_when_it_ends_not_after_a_hundred_more(
    store: Store, clock: VirtualClock
) -> None:
    """Successes are recorded 100 to a transaction, but none waits more than ``_COMPLETE_AFTER_S``:
    with a call of a second each, every call's item is succeeded (its result readable by a waiting
    caller) before the next call ends, not once the claim's hundredth call has run."""
    app = App("slow")
    first: list[int] = []
    seen: list[ItemState] = []

    @app.handler("slow", model="async")
    def slow(record: Any, context: Any) -> dict[str, int]:
        seen.append(store.items.get(first[0]).state)
        clock.advance(1.0)  # the call takes a second of the store's clock
        return {"n": record["n"]}

    handles = Invoker(store, app).submit_many("slow", [{"n": n} for n in range(5)])
    first.append(handles[0].id)
    Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)
    assert seen == [ItemState.RUNNING] + [ItemState.SUCCEEDED] * 4


def test_fast_successes_are_still_recorded_a_hundred_to_a_transaction(
    store: Store, monkeypatch: Any
) -> None:
    """No time passes between no-op calls on the virtual clock: 250 successes, three completions."""
    app = _app([])
    Invoker(store, app).submit_many("first", [{"n": n} for n in range(250)])
    completions: list[int] = []
    worker = Worker(store, app, WorkerSettings(heartbeat=False, prefetch=500))
    invocations = worker.loop.runner._invocations
    original = invocations.complete

    def counted(successes: Any, **kwargs: Any) -> Any:
        completions.append(len(successes))
        return original(successes, **kwargs)

    monkeypatch.setattr(invocations, "complete", counted)
    report = worker.run(until_idle=True)
    assert report.succeeded == 250 and completions == [100, 100, 50]
