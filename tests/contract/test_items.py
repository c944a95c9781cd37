"""Work items: the contract every backend keeps (enqueue, claim, leases, outcomes, dead letters)."""

from __future__ import annotations

import copy
import dataclasses
import threading
from datetime import timedelta

import pytest
import sqlalchemy as sa

from vardiya.clock import VirtualClock
from vardiya.errors import InvalidInput, LeaseLost
from vardiya.store import AttemptOutcome, ItemState, Store, open_store
from vardiya.store.schema import attempts as attempts_table
from vardiya.store.schema import work_items


def _item_rows(store: Store) -> int:
    with store.engine.connect() as connection:
        return connection.execute(sa.select(sa.func.count()).select_from(work_items)).scalar_one()


def _history_rows(store: Store, item_id: int | None = None) -> int:
    """Attempts as the store tells them (a success is told by the item row, failures by their own rows)."""
    if item_id is not None:
        return len(store.items.history(item_id))
    with store.engine.connect() as connection:
        ids = list(connection.execute(sa.select(work_items.c.id)).scalars())
    return sum(len(store.items.history(i)) for i in ids)


def _stored_history_rows(store: Store) -> int:
    with store.engine.connect() as connection:
        return connection.execute(sa.select(sa.func.count()).select_from(attempts_table)).scalar_one()


# -- enqueue --------------------------------------------------------------------------------------------


def test_enqueue_same_key_returns_existing_item_unchanged(store: Store, clock: VirtualClock) -> None:
    first = store.items.enqueue("tick", {"n": 1}, key="k1", max_attempts=5)
    clock.advance(10)
    second = store.items.enqueue("tick", {"n": 2}, key="k1", max_attempts=2)

    assert second.id == first.id
    assert second.payload == {"n": 1}
    assert second.max_attempts == 5
    assert second.created_at == first.created_at == second.updated_at
    assert _item_rows(store) == 1


def test_different_kinds_may_share_a_key(store: Store) -> None:
    tick = store.items.enqueue("tick", {"a": 1}, key="shared")
    task = store.items.enqueue("task", {"b": 2}, key="shared")

    assert tick.id != task.id
    assert store.items.find("tick", "shared") == tick
    assert store.items.find("task", "shared") == task


def test_enqueue_without_key_makes_a_new_item_each_time(store: Store) -> None:
    first = store.items.enqueue("call", {"x": 1})
    second = store.items.enqueue("call", {"x": 1})

    assert first.id != second.id
    assert first.key != second.key


def test_enqueued_item_fields(store: Store, clock: VirtualClock) -> None:
    item = store.items.enqueue("tick", {"slot": 3, "names": ["a", "ş"]}, key="k", max_attempts=4)

    assert item.state is ItemState.PENDING
    assert item.attempts == 0
    assert item.max_attempts == 4
    assert item.run_after == clock.now()
    assert item.created_at == clock.now()
    assert item.lease_owner is None and item.lease_until is None and item.last_error is None
    assert store.items.get(item.id) == item
    assert store.items.get(item.id + 1000) is None


def test_enqueue_many_counts_only_new_items(store: Store) -> None:
    assert store.items.enqueue_many("rec", [(f"k{i}", {"i": i}) for i in range(10)], chunk_size=3) == 10
    again = [(f"k{i}", {"i": -i}) for i in range(5, 15)]

    assert store.items.enqueue_many("rec", again, chunk_size=4) == 5
    assert _item_rows(store) == 15
    assert store.items.find("rec", "k7").payload == {"i": 7}  # kept, not overwritten
    assert store.items.find("rec", "k12").payload == {"i": -12}


def test_enqueue_many_ids_returns_the_new_items_by_key_and_keeps_the_first_of_a_repeated_key(
    store: Store, clock: VirtualClock
) -> None:
    store.items.enqueue("rec", {"old": True}, key="old")
    later = clock.now() + timedelta(minutes=5)
    items = [("a", {"n": 1}), ("old", {"n": 2}), ("b", [1, "two", None]), ("a", {"n": 3}), ("c", "text"), ("d", 7)]

    ids = store.items.enqueue_many_ids("rec", items, max_attempts=5, run_after=later, chunk_size=2)

    assert sorted(ids) == ["a", "b", "c", "d"]
    for key, payload in [("a", {"n": 1}), ("b", [1, "two", None]), ("c", "text"), ("d", 7)]:
        item = store.items.get(ids[key])
        assert (item.kind, item.key, item.payload, item.state) == ("rec", key, payload, ItemState.PENDING)
        assert (item.attempts, item.max_attempts, item.run_after, item.created_at) == (0, 5, later, clock.now())
    assert store.items.find("rec", "old").payload == {"old": True}
    assert [item.key for item in store.items.claim(10, owner="w", lease=600)] == ["old"]  # the rest wait
    clock.advance(timedelta(minutes=5))
    assert [item.key for item in store.items.claim(10, owner="w", lease=30)] == ["a", "b", "c", "d"]


@pytest.mark.parametrize("payload", [{"when": object()}, {1, 2}, float("nan"), {"b": b"bytes"}])
def test_payload_that_does_not_serialise_is_refused(store: Store, payload: object) -> None:
    with pytest.raises(InvalidInput, match="does not serialise to JSON") as raised:
        store.items.enqueue("call", payload, key="bad")
    assert "\n" not in str(raised.value)
    with pytest.raises(InvalidInput):
        store.items.enqueue_many("call", [("good-1", {"ok": True}), ("bad", payload)])
    assert _item_rows(store) == 0


@pytest.mark.parametrize("max_attempts", [0, -1, True, False, 2.0, "3"])
def test_max_attempts_must_be_a_whole_number_of_at_least_one(store: Store, max_attempts: object) -> None:
    with pytest.raises(InvalidInput, match="max_attempts"):
        store.items.enqueue("call", {}, key="k", max_attempts=max_attempts)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="max_attempts"):
        store.items.enqueue_many("call", [("k", {})], max_attempts=max_attempts)  # type: ignore[arg-type]
    assert _item_rows(store) == 0


def test_naive_run_after_is_refused(store: Store, clock: VirtualClock) -> None:
    with pytest.raises(InvalidInput, match="no time zone"):
        store.items.enqueue("call", {}, key="k", run_after=clock.now().replace(tzinfo=None))
    assert _item_rows(store) == 0


# -- claim ----------------------------------------------------------------------------------------------


def test_claim_takes_at_most_n_items(store: Store) -> None:
    store.items.enqueue_many("rec", [(f"k{i}", i) for i in range(7)])

    first = store.items.claim(3, owner="w1", lease=30)
    second = store.items.claim(3, owner="w2", lease=30)
    third = store.items.claim(3, owner="w3", lease=30)

    assert [len(first), len(second), len(third)] == [3, 3, 1]
    ids = [item.id for batch in (first, second, third) for item in batch]
    assert len(set(ids)) == 7
    assert store.items.claim(3, owner="w4", lease=30) == []
    assert store.items.claim(0, owner="w4", lease=30) == []


def test_claim_only_takes_the_given_kinds(store: Store) -> None:
    tick = store.items.enqueue("tick", {}, key="a")
    task = store.items.enqueue("task", {}, key="a")
    call = store.items.enqueue("call", {}, key="a")

    claimed = store.items.claim(10, owner="w", lease=30, kinds=["tick", "call"])

    assert {item.id for item in claimed} == {tick.id, call.id}
    assert store.items.get(task.id).state is ItemState.PENDING
    assert [item.id for item in store.items.claim(10, owner="w", lease=30)] == [task.id]


def test_item_is_not_claimed_before_run_after(store: Store, clock: VirtualClock) -> None:
    later = store.items.enqueue("call", {}, key="later", run_after=clock.now() + timedelta(seconds=60))

    assert store.items.claim(10, owner="w", lease=30) == []
    clock.advance(59)
    assert store.items.claim(10, owner="w", lease=30) == []
    clock.advance(1)
    assert [item.id for item in store.items.claim(10, owner="w", lease=30)] == [later.id]


def test_claim_picks_by_run_after_then_id(store: Store, clock: VirtualClock) -> None:
    t0 = clock.now()
    late = store.items.enqueue("call", {}, key="late", run_after=t0 + timedelta(seconds=5))
    early_1 = store.items.enqueue("call", {}, key="early-1", run_after=t0 + timedelta(seconds=1))
    early_2 = store.items.enqueue("call", {}, key="early-2", run_after=t0 + timedelta(seconds=1))
    earliest = store.items.enqueue("call", {}, key="earliest", run_after=t0)
    clock.advance(10)

    picked = store.items.claim(3, owner="w", lease=30)

    assert [item.id for item in picked] == [earliest.id, early_1.id, early_2.id]
    assert store.items.get(late.id).state is ItemState.PENDING


def test_claim_counts_the_attempt_and_sets_the_lease(store: Store, clock: VirtualClock) -> None:
    item = store.items.enqueue("call", {"x": 1}, key="k")
    clock.advance(5)

    (claimed,) = store.items.claim(1, owner="worker-a", lease=timedelta(seconds=45))

    assert claimed.id == item.id
    assert claimed.state is ItemState.RUNNING
    assert claimed.attempts == 1
    assert claimed.lease_owner == "worker-a"
    assert claimed.lease_until == clock.now() + timedelta(seconds=45)
    assert claimed.updated_at == clock.now()
    assert store.items.get(item.id) == claimed


@pytest.mark.parametrize(
    "payload", [None, 0, -7, 1.5, "text", "7", "null", True, False, [1, "two", None], {"a": {"b": [1.25]}}]
)
def test_claimed_payload_is_the_enqueued_one(store: Store, payload: object) -> None:
    item = store.items.enqueue("call", payload, key="k")

    (claimed,) = store.items.claim(1, owner="w", lease=30)

    assert claimed.payload == payload and type(claimed.payload) is type(payload)
    assert claimed.payload is claimed.payload  # decoded once
    assert claimed == store.items.get(item.id)
    if not isinstance(payload, list | dict):
        assert hash(claimed) == hash(store.items.get(item.id))


def test_claimed_item_is_a_frozen_value(store: Store) -> None:
    store.items.enqueue("call", {"x": 1}, key="k")
    (claimed,) = store.items.claim(1, owner="w", lease=30)

    with pytest.raises(dataclasses.FrozenInstanceError):
        claimed.attempts = 5  # type: ignore[misc]
    assert repr(claimed).startswith(f"WorkItem(id={claimed.id}, kind='call', key='k', payload={{'x': 1}}, ")
    assert copy.copy(claimed) == claimed


def test_claim_and_complete_more_items_than_one_statement_binds(store: Store) -> None:
    # 1,300 ids: more than any one statement of the store binds, and not a multiple of its chunks.
    store.items.enqueue_many("rec", [(f"k{i:04d}", {"i": i}) for i in range(1_300)])

    claimed = store.items.claim(2_000, owner="w", lease=30)

    assert [item.payload["i"] for item in claimed] == list(range(1_300))
    assert {item.attempts for item in claimed} == {1}
    assert store.items.counts()[ItemState.RUNNING] == 1_300
    assert store.items.complete_many([item.id for item in claimed], owner="w") == set()
    assert store.items.counts()[ItemState.SUCCEEDED] == 1_300


def test_complete_many_with_some_items_no_longer_held(store: Store, clock: VirtualClock) -> None:
    store.items.enqueue_many("call", [(f"k{i}", i) for i in range(5)])
    held = store.items.claim(3, owner="w", lease=30)
    (other,) = store.items.claim(1, owner="someone-else", lease=30)
    pending = store.items.find("call", "k4")
    clock.advance(2)
    ids = [held[0].id, other.id, held[1].id, pending.id, held[1].id, held[2].id]

    assert store.items.complete_many(ids, owner="w") == {other.id, pending.id}

    assert [store.items.get(item.id).state for item in held] == [ItemState.SUCCEEDED] * 3
    assert store.items.get(held[0].id).updated_at == clock.now()
    assert store.items.get(other.id) == other
    assert store.items.get(pending.id) == pending
    assert store.items.complete_many([held[0].id], owner="w") == {held[0].id}  # done already


@pytest.mark.parametrize("lease", [0, -5, timedelta(0)])
def test_lease_must_be_positive(store: Store, lease: float | timedelta) -> None:
    store.items.enqueue("call", {}, key="k")
    with pytest.raises(InvalidInput, match="lease"):
        store.items.claim(1, owner="w", lease=lease)
    assert store.items.counts()[ItemState.PENDING] == 1


# -- heartbeat, complete, fail --------------------------------------------------------------------------


def test_heartbeat_extends_the_lease(store: Store, clock: VirtualClock) -> None:
    item = store.items.enqueue("call", {}, key="k")
    store.items.claim(1, owner="w", lease=30)
    clock.advance(20)

    assert store.items.heartbeat([item.id], owner="w", lease=30) == set()
    clock.advance(15)  # past the first lease (30 s), inside the extended one (50 s)

    assert store.items.reap() == 0
    held = store.items.get(item.id)
    assert held.state is ItemState.RUNNING
    assert held.lease_owner == "w"
    assert held.lease_until == clock.now() + timedelta(seconds=15)
    clock.advance(16)
    assert store.items.reap() == 1


def test_heartbeat_by_non_owner_reports_lost_and_changes_nothing(store: Store, clock: VirtualClock) -> None:
    item = store.items.enqueue("call", {}, key="k")
    (claimed,) = store.items.claim(1, owner="w", lease=30)
    clock.advance(10)

    assert store.items.heartbeat([item.id], owner="intruder", lease=300) == {item.id}
    assert store.items.get(item.id) == claimed


@pytest.mark.parametrize("backend", ["postgresql"])  # SQLite has one writer at a time: no row locks
def test_heartbeat_skips_an_item_another_transaction_is_ending_instead_of_waiting(
    store: Store, clock: VirtualClock, backend: str
) -> None:
    """On PostgreSQL a heartbeat never waits for a row lock, so it can never be in a deadlock with a
    completion of the same items (a completion locks its rows in id order; a reap skips locked rows)."""
    first = store.items.enqueue("call", {}, key="a")
    second = store.items.enqueue("call", {}, key="b")
    store.items.claim(2, owner="w", lease=30)
    clock.advance(20)
    beat: dict[str, set[int]] = {}
    with store.engine.connect() as other:
        other.execute(sa.select(work_items.c.id).where(work_items.c.id == first.id).with_for_update())
        thread = threading.Thread(
            target=lambda: beat.setdefault("lost", store.items.heartbeat([first.id, second.id], owner="w", lease=30))
        )
        thread.start()
        thread.join(timeout=10)
        waited = thread.is_alive()
        other.rollback()
    thread.join()
    assert not waited, "the heartbeat waited for the row lock"
    # the locked item is reported not extended at once; the other one is extended
    assert beat["lost"] == {first.id}
    assert store.items.get(second.id).lease_until == clock.now() + timedelta(seconds=30)
    assert store.items.get(first.id).lease_until == clock.now() + timedelta(seconds=10)
    assert store.items.heartbeat([first.id, second.id], owner="w", lease=30) == set()
    assert store.items.get(first.id).lease_until == clock.now() + timedelta(seconds=30)


def test_complete_records_success_and_result(store: Store, clock: VirtualClock) -> None:
    item = store.items.enqueue("call", {}, key="k")
    store.items.claim(1, owner="w", lease=30)
    claimed_at = clock.now()
    clock.advance(3)

    store.items.complete(item.id, owner="w", result={"rows": 12})

    done = store.items.get(item.id)
    assert done.state is ItemState.SUCCEEDED
    assert done.result == {"rows": 12}
    # The lease is gone; the owner stays as the one that finished the item.
    assert done.lease_owner == "w" and done.lease_until is None
    assert _stored_history_rows(store) == 0  # a success costs no second write
    (attempt,) = store.items.history(item.id)
    assert (attempt.attempt, attempt.outcome, attempt.owner) == (1, AttemptOutcome.SUCCEEDED, "w")
    assert (attempt.started_at, attempt.ended_at) == (claimed_at, clock.now())


def test_complete_many_with_results_per_item(store: Store) -> None:
    store.items.enqueue_many("call", [("a", 1), ("b", 2), ("c", 3)])
    a, b, c = store.items.claim(3, owner="w", lease=30)

    lost = store.items.complete_many([a.id, b.id, c.id], owner="w", results={a.id: "ra", c.id: ["rc"]})

    assert lost == set()
    assert [store.items.get(i).result for i in (a.id, b.id, c.id)] == ["ra", None, ["rc"]]
    assert store.items.counts()[ItemState.SUCCEEDED] == 3


def test_complete_and_fail_by_non_owner_change_nothing(store: Store, clock: VirtualClock) -> None:
    item = store.items.enqueue("call", {}, key="k")
    pending = store.items.enqueue("call", {}, key="never-claimed")
    (claimed,) = store.items.claim(1, owner="w", lease=30)
    clock.advance(1)

    assert store.items.complete_many([item.id, pending.id], owner="intruder") == {item.id, pending.id}
    with pytest.raises(LeaseLost, match=f"work item {item.id} is no longer held by intruder"):
        store.items.complete(item.id, owner="intruder", result="stolen")
    with pytest.raises(LeaseLost):
        store.items.fail(item.id, owner="intruder", error="boom", retry_at=clock.now())
    assert store.items.fail_many([item.id], owner="intruder", error="boom") == {}

    assert store.items.get(item.id) == claimed
    assert store.items.get(pending.id) == pending
    assert _history_rows(store) == 0


def test_fail_with_retry_at_makes_the_item_claimable_after_it(store: Store, clock: VirtualClock) -> None:
    item = store.items.enqueue("call", {}, key="k", max_attempts=3)
    store.items.claim(1, owner="w", lease=30)
    retry_at = clock.now() + timedelta(seconds=120)

    assert store.items.fail(item.id, owner="w", error="timeout talking to the API", retry_at=retry_at) is (
        ItemState.FAILED
    )

    failed = store.items.get(item.id)
    assert failed.state is ItemState.FAILED
    assert failed.run_after == retry_at
    assert failed.last_error == "timeout talking to the API"
    assert failed.lease_owner is None
    clock.advance(119)
    assert store.items.claim(1, owner="w", lease=30) == []
    clock.advance(1)
    (again,) = store.items.claim(1, owner="w2", lease=30)
    assert (again.id, again.attempts, again.lease_owner) == (item.id, 2, "w2")


def test_fail_after_max_attempts_is_dead_with_full_history(store: Store, clock: VirtualClock) -> None:
    item = store.items.enqueue("call", {"to": "dlq"}, key="k", max_attempts=3)
    spans = []
    states = []
    for attempt in range(1, 4):
        (claimed,) = store.items.claim(1, owner=f"w{attempt}", lease=30)
        assert claimed.attempts == attempt
        started = clock.now()
        clock.advance(2)
        states.append(
            store.items.fail(item.id, owner=f"w{attempt}", error=f"error {attempt}", retry_at=clock.now())
        )
        spans.append((started, clock.now()))
        clock.advance(1)

    assert states == [ItemState.FAILED, ItemState.FAILED, ItemState.DEAD]
    dead = store.items.get(item.id)
    assert dead.state is ItemState.DEAD
    assert dead.attempts == 3
    assert dead.payload == {"to": "dlq"}
    assert dead.last_error == "error 3"
    assert store.items.claim(1, owner="w", lease=30) == []
    history = store.items.history(item.id)
    assert [(a.attempt, a.outcome, a.error, a.owner) for a in history] == [
        (1, AttemptOutcome.FAILED, "error 1", "w1"),
        (2, AttemptOutcome.FAILED, "error 2", "w2"),
        (3, AttemptOutcome.FAILED, "error 3", "w3"),
    ]
    assert [(a.started_at, a.ended_at) for a in history] == spans


def test_fail_without_retry_at_is_dead_at_once(store: Store) -> None:
    item = store.items.enqueue("call", {}, key="k", max_attempts=5)
    store.items.claim(1, owner="w", lease=30)

    assert store.items.fail(item.id, owner="w", error="bad record: no such customer") is ItemState.DEAD

    dead = store.items.get(item.id)
    assert (dead.state, dead.attempts, dead.last_error) == (ItemState.DEAD, 1, "bad record: no such customer")
    assert [a.outcome for a in store.items.history(item.id)] == [AttemptOutcome.FAILED]


# -- leases ---------------------------------------------------------------------------------------------


def test_expired_lease_is_reaped_as_an_attempt(store: Store, clock: VirtualClock) -> None:
    item = store.items.enqueue("call", {}, key="k", max_attempts=3)
    store.items.claim(1, owner="doomed", lease=30)
    claimed_at = clock.now()
    clock.advance(30)
    assert store.items.reap() == 0  # the lease runs until exactly 30 s
    clock.advance(1)

    assert store.items.reap() == 1

    reaped = store.items.get(item.id)
    assert reaped.state is ItemState.FAILED
    assert reaped.attempts == 1
    assert reaped.lease_owner is None and reaped.lease_until is None
    assert "doomed" in reaped.last_error
    (attempt,) = store.items.history(item.id)
    assert (attempt.attempt, attempt.outcome, attempt.owner) == (1, AttemptOutcome.LEASE_EXPIRED, "doomed")
    assert (attempt.started_at, attempt.ended_at) == (claimed_at, claimed_at + timedelta(seconds=30))
    (again,) = store.items.claim(1, owner="next", lease=30)
    assert (again.id, again.attempts) == (item.id, 2)


def test_claim_reaps_expired_leases_itself(store: Store, clock: VirtualClock) -> None:
    item = store.items.enqueue("call", {}, key="k")
    store.items.claim(1, owner="doomed", lease=30)
    clock.advance(31)

    (again,) = store.items.claim(1, owner="next", lease=30)

    assert (again.id, again.attempts, again.lease_owner) == (item.id, 2, "next")
    assert [a.outcome for a in store.items.history(item.id)] == [AttemptOutcome.LEASE_EXPIRED]


def test_item_that_kills_its_worker_every_time_ends_dead(store: Store, clock: VirtualClock) -> None:
    item = store.items.enqueue("call", {"poison": True}, key="k", max_attempts=3)
    for attempt in range(1, 4):
        (claimed,) = store.items.claim(1, owner=f"w{attempt}", lease=30)
        assert claimed.attempts == attempt
        clock.advance(31)
        assert store.items.reap() == 1

    dead = store.items.get(item.id)
    assert dead.state is ItemState.DEAD
    assert dead.payload == {"poison": True}
    clock.advance(3600)
    assert store.items.claim(1, owner="w", lease=30) == []
    history = store.items.history(item.id)
    assert [(a.attempt, a.outcome, a.owner) for a in history] == [
        (1, AttemptOutcome.LEASE_EXPIRED, "w1"),
        (2, AttemptOutcome.LEASE_EXPIRED, "w2"),
        (3, AttemptOutcome.LEASE_EXPIRED, "w3"),
    ]


def test_complete_after_reap_and_reclaim_is_lease_lost(store: Store, clock: VirtualClock) -> None:
    item = store.items.enqueue("call", {}, key="k")
    store.items.claim(1, owner="slow", lease=30)
    clock.advance(31)
    store.items.reap()
    store.items.claim(1, owner="fast", lease=30)

    with pytest.raises(LeaseLost):
        store.items.complete(item.id, owner="slow", result="late")
    assert store.items.heartbeat([item.id], owner="slow", lease=30) == {item.id}
    held = store.items.get(item.id)
    assert (held.state, held.lease_owner) == (ItemState.RUNNING, "fast")

    store.items.complete(item.id, owner="fast", result="on time")

    done = store.items.get(item.id)
    assert (done.state, done.result, done.attempts) == (ItemState.SUCCEEDED, "on time", 2)
    assert [(a.attempt, a.owner, a.outcome) for a in store.items.history(item.id)] == [
        (1, "slow", AttemptOutcome.LEASE_EXPIRED),
        (2, "fast", AttemptOutcome.SUCCEEDED),
    ]


def test_release_gives_items_back_without_counting_the_attempt(store: Store, clock: VirtualClock) -> None:
    store.items.enqueue_many("call", [("a", 1), ("b", 2)])
    a, b = store.items.claim(2, owner="draining", lease=30)
    clock.advance(5)

    assert store.items.release([a.id, b.id], owner="someone-else") == {a.id, b.id}
    assert store.items.get(a.id).state is ItemState.RUNNING
    assert store.items.release([a.id], owner="draining") == set()

    released = store.items.get(a.id)
    assert (released.state, released.attempts, released.lease_owner) == (ItemState.PENDING, 0, None)
    assert store.items.history(a.id) == []
    assert store.items.get(b.id).state is ItemState.RUNNING
    (again,) = store.items.claim(5, owner="next", lease=30)
    assert (again.id, again.attempts) == (a.id, 1)


# -- dead items -----------------------------------------------------------------------------------------


def _dead_item(store: Store, key: str, *, errors: int = 1, kind: str = "dlq") -> int:
    """An item of ``kind`` that failed ``errors`` times and is now dead."""
    item = store.items.enqueue(kind, {"key": key}, key=key, max_attempts=errors)
    for attempt in range(errors):
        (claimed,) = store.items.claim(1, owner="w", lease=30, kinds=[kind])
        assert claimed.id == item.id
        store.items.fail(item.id, owner="w", error=f"{key} error {attempt + 1}", retry_at=store.clock.now())
    assert store.items.get(item.id).state is ItemState.DEAD
    return item.id


def test_redrive_makes_dead_items_pending_and_keeps_history(store: Store, clock: VirtualClock) -> None:
    dead = _dead_item(store, "d", errors=2)
    pending = store.items.enqueue("call", {}, key="p")
    clock.advance(60)

    assert store.items.redrive([dead, pending.id]) == 1

    redriven = store.items.get(dead)
    assert (redriven.state, redriven.attempts, redriven.max_attempts) == (ItemState.PENDING, 0, 2)
    assert redriven.run_after == clock.now()
    assert redriven.payload == {"key": "d"}
    assert [a.error for a in store.items.history(dead)] == ["d error 1", "d error 2"]
    assert store.items.get(pending.id) == pending
    (again,) = store.items.claim(1, owner="w", lease=30, kinds=["dlq"])
    assert again.attempts == 1
    store.items.complete(again.id, owner="w")
    assert [a.attempt for a in store.items.history(dead)] == [1, 2, 1]


def test_redrive_can_change_max_attempts(store: Store) -> None:
    dead = _dead_item(store, "d")

    with pytest.raises(InvalidInput):
        store.items.redrive([dead], max_attempts=0)
    assert store.items.get(dead).state is ItemState.DEAD
    assert store.items.redrive([dead], max_attempts=7) == 1
    assert store.items.get(dead).max_attempts == 7


def test_purge_deletes_only_dead_items_and_their_history(store: Store) -> None:
    dead = _dead_item(store, "d", errors=2)
    survivor = store.items.enqueue("call", {}, key="s")
    store.items.claim(1, owner="w", lease=30)
    store.items.complete(survivor.id, owner="w")
    pending = store.items.enqueue("call", {}, key="p")

    assert store.items.purge([dead, survivor.id, pending.id]) == 1

    assert store.items.get(dead) is None
    assert _history_rows(store, dead) == 0
    assert store.items.get(survivor.id).state is ItemState.SUCCEEDED
    assert _history_rows(store, survivor.id) == 1
    assert store.items.get(pending.id) == pending
    assert store.items.purge([dead]) == 0


# -- reading --------------------------------------------------------------------------------------------


def test_counts_by_state_and_kind(store: Store) -> None:
    store.items.enqueue_many("tick", [(f"t{i}", i) for i in range(4)])
    store.items.enqueue_many("call", [(f"c{i}", i) for i in range(3)])
    running = store.items.claim(2, owner="w", lease=30, kinds=["tick"])
    store.items.complete(running[0].id, owner="w")
    _dead_item(store, "d")

    assert store.items.counts() == {
        ItemState.PENDING: 5,
        ItemState.RUNNING: 1,
        ItemState.SUCCEEDED: 1,
        ItemState.FAILED: 0,
        ItemState.DEAD: 1,
    }
    assert store.items.counts(kind="tick") == {
        ItemState.PENDING: 2,
        ItemState.RUNNING: 1,
        ItemState.SUCCEEDED: 1,
        ItemState.FAILED: 0,
        ItemState.DEAD: 0,
    }
    assert set(store.items.counts(kind="nothing").values()) == {0}


def test_list_filters(store: Store, clock: VirtualClock) -> None:
    old_dead = _dead_item(store, "old")  # "old error 1"
    clock.advance(3600)
    cutoff = clock.now()
    clock.advance(1)
    new_dead = _dead_item(store, "new")  # "new error 1"
    odd = store.items.enqueue("call", {}, key="odd", max_attempts=1)
    store.items.claim(1, owner="w", lease=30)
    store.items.fail(odd.id, owner="w", error="100% off_by_one")
    tick = store.items.enqueue("tick", {}, key="t")

    def ids(**filters: object) -> list[int]:
        return [item.id for item in store.items.list(**filters)]  # type: ignore[arg-type]

    assert ids() == [old_dead, new_dead, odd.id, tick.id]
    assert ids(state=ItemState.DEAD) == [old_dead, new_dead, odd.id]
    assert ids(state=ItemState.PENDING) == [tick.id]
    assert ids(kind="tick") == [tick.id]
    assert ids(state=ItemState.DEAD, updated_before=cutoff) == [old_dead]
    assert ids(error_contains="new error") == [new_dead]
    assert ids(error_contains="error 1") == [old_dead, new_dead]
    # LIKE wildcards in the needle are literal text
    assert ids(error_contains="100%") == [odd.id]
    assert ids(error_contains="f_b") == [odd.id]
    assert ids(error_contains="r_1") == []
    assert ids(error_contains="%") == [odd.id]
    assert ids(state=ItemState.DEAD, limit=2) == [old_dead, new_dead]
    with pytest.raises(InvalidInput):
        store.items.list(updated_before=cutoff.replace(tzinfo=None))


@pytest.mark.parametrize("outcome", ["complete", "fail"])
def test_outcome_racing_a_reap_is_lost_and_leaves_no_attempt(
    store: Store, store_url: str, clock: VirtualClock, outcome: str
) -> None:
    """A slow worker finishing while another process reaps its lease: the reap wins, cleanly.

    The reap runs in a transaction held open; the worker's outcome starts beside it. Its first statement
    either waits for the reap's row lock (then the test lets the reap commit after a second), or runs
    at once, and then the reap commits right after it, before the worker's next statement.
    """
    item = store.items.enqueue("call", {}, key="k")
    store.items.claim(1, owner="slow", lease=30)
    clock.advance(31)
    worker = open_store(store_url, clock=clock)
    reaper = store.engine.connect()
    committed = False
    commit_lock = threading.Lock()
    first_statement_done = threading.Event()
    errors: list[BaseException] = []

    def commit_reap() -> None:
        nonlocal committed
        with commit_lock:
            if not committed:
                reaper.commit()
                committed = True

    def after_statement(*_args: object) -> None:
        if not first_statement_done.is_set():
            commit_reap()
            first_statement_done.set()

    def finish() -> None:
        try:
            if outcome == "complete":
                worker.items.complete(item.id, owner="slow", result="late")
            else:
                worker.items.fail(item.id, owner="slow", error="late", retry_at=clock.now())
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            errors.append(error)

    try:
        reaper.begin()
        assert store.items._reap(reaper, clock.now()) == 1
        sa.event.listen(worker.engine, "after_cursor_execute", after_statement)
        thread = threading.Thread(target=finish)
        thread.start()
        if not first_statement_done.wait(timeout=1.0):
            commit_reap()  # the worker waits on the reap's lock: let the reap finish
        thread.join(timeout=60)
        assert not thread.is_alive()
    finally:
        commit_reap()
        reaper.close()
        worker.close()

    assert [type(error) for error in errors] == [LeaseLost]
    reaped = store.items.get(item.id)
    assert (reaped.state, reaped.result, reaped.attempts) == (ItemState.FAILED, None, 1)
    assert [(a.attempt, a.outcome) for a in store.items.history(item.id)] == [(1, AttemptOutcome.LEASE_EXPIRED)]


def test_enqueue_many_with_a_bad_payload_in_a_later_chunk_writes_nothing(store) -> None:  # type: ignore[no-untyped-def]
    items = [(f"k{n}", {"n": n}) for n in range(50)] + [("bad", {"when": object()})]
    with pytest.raises(InvalidInput, match="does not serialise"):
        store.items.enqueue_many("bulk", items, chunk_size=10)
    assert sum(store.items.counts(kind="bulk").values()) == 0


def test_complete_many_is_one_statement_of_its_own_and_tells_the_lost_ids(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL a completion runs as one autocommit statement (no SQLAlchemy transaction), on
    SQLite on the driver connection; either way results and busy times are stored, the ids another
    owner holds come back as lost and are left as they were."""
    store.items.enqueue_many("call", [(f"k{i}", {"i": i}) for i in range(6)])
    mine = store.items.claim(4, owner="me", lease=30)
    theirs = store.items.claim(2, owner="them", lease=30)

    def no_transaction() -> None:
        raise AssertionError("a completion opened a SQLAlchemy transaction")

    monkeypatch.setattr(store, "transaction", no_transaction)
    ids = [item.id for item in mine] + [theirs[0].id]
    lost = store.items.complete_many(
        ids, owner="me", results={mine[0].id: {"ok": 1}}, busy={item.id: 2.5 for item in mine}
    )
    monkeypatch.undo()
    assert lost == {theirs[0].id}
    assert store.items.get(mine[0].id).result == {"ok": 1}
    assert all(store.items.get(item.id).state is ItemState.SUCCEEDED for item in mine)
    assert store.items.get(theirs[0].id).state is ItemState.RUNNING
    with store.reading() as connection:
        busy = dict(connection.execute(sa.select(work_items.c.id, work_items.c.busy_ms)).all())
    assert [busy[item.id] for item in mine] == [2.5] * 4 and busy[theirs[0].id] is None


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_plain_claim_on_postgresql_is_one_statement_of_its_own(
    store: Store, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between reaps, a claim without rate limits opens no SQLAlchemy transaction; it still takes the
    oldest ready items, leased to its owner, and two claims never take the same item."""
    store.items.enqueue_many("call", [(f"k{i}", {"i": i}) for i in range(5)])
    first = store.items.claim(1, owner="me", lease=30)  # a store's first claim reaps, in a transaction

    def no_transaction() -> None:
        raise AssertionError("a plain claim opened a SQLAlchemy transaction")

    monkeypatch.setattr(store, "transaction", no_transaction)
    second = store.items.claim(3, owner="you", lease=30, start=1)
    monkeypatch.undo()
    assert [item.key for item in first + second] == ["k0", "k1", "k2", "k3"]
    assert {store.items.get(item.id).lease_owner for item in second} == {"you"}
