"""The started marker: a lost lease charges an attempt to a started item only (both backends)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from vardiya.clock import VirtualClock
from vardiya.errors import InvalidInput
from vardiya.store import AttemptOutcome, ItemState, Store
from vardiya.store.schema import work_items

LEASE_S = 30.0


def _expire(store: Store, clock: VirtualClock) -> int:
    clock.advance(LEASE_S + 1)
    return store.items.reap()


def test_claim_marks_only_the_first_items_started_and_a_reap_charges_only_those(
    store: Store, clock: VirtualClock
) -> None:
    store.items.enqueue_many("call", [(f"k{i}", {"i": i}) for i in range(10)], max_attempts=3)
    claimed = store.items.claim(10, owner="w", lease=LEASE_S, start=2)
    store.items.start([claimed[2].id], owner="w")  # the worker reached a third one
    store.items.start([claimed[3].id], owner="someone-else")  # not held by that owner: ignored
    started = {item.id for item in claimed[:3]}

    assert _expire(store, clock) == 10
    for item in claimed:
        now = store.items.get(item.id)
        history = [(a.attempt, a.outcome) for a in store.items.history(item.id)]
        if item.id in started:
            assert (now.state, now.attempts) == (ItemState.FAILED, 1)
            assert history == [(1, AttemptOutcome.LEASE_EXPIRED)]
        else:  # never started: back to ready as if never claimed, nothing in its history
            assert (now.state, now.attempts, now.lease_owner) == (ItemState.PENDING, 0, None)
            assert history == []
            assert now.run_after == item.run_after  # in its old place in the queue


def test_an_item_that_kills_its_worker_every_time_still_ends_dead(store: Store, clock: VirtualClock) -> None:
    item = store.items.enqueue("call", {"poison": True}, key="poison", max_attempts=3)
    for attempt in (1, 2, 3):
        (claimed,) = store.items.claim(5, owner=f"w{attempt}", lease=LEASE_S, start=0)
        store.items.start([claimed.id], owner=f"w{attempt}")  # its handler starts, then the worker dies
        assert _expire(store, clock) == 1
    assert store.items.get(item.id).state is ItemState.DEAD


def test_never_started_items_survive_any_number_of_crashes(store: Store, clock: VirtualClock) -> None:
    store.items.enqueue_many("call", [(f"k{i}", None) for i in range(5)], max_attempts=1)
    for _crash in range(5):
        assert len(store.items.claim(5, owner="w", lease=LEASE_S, start=0)) == 5
        _expire(store, clock)
    assert store.items.counts()[ItemState.PENDING] == 5


def test_a_claim_by_default_starts_what_it_claims(store: Store, clock: VirtualClock) -> None:
    store.items.enqueue_many("call", [(f"k{i}", None) for i in range(3)], max_attempts=3)
    store.items.claim(3, owner="w", lease=LEASE_S)
    _expire(store, clock)
    assert store.items.counts()[ItemState.FAILED] == 3


def test_a_released_item_is_no_longer_started(store: Store, clock: VirtualClock) -> None:
    item = store.items.enqueue("call", None, key="k")
    store.items.claim(1, owner="w", lease=LEASE_S)
    store.items.release([item.id], owner="w")
    store.items.claim(1, owner="w2", lease=LEASE_S, start=0)
    _expire(store, clock)
    assert (store.items.get(item.id).state, store.items.get(item.id).attempts) == (ItemState.PENDING, 0)


@pytest.mark.parametrize("start", [-1, 1.5, True, "2"])
def test_a_bad_start_count_is_refused(store: Store, start: object) -> None:
    store.items.enqueue("call", None, key="k")
    with pytest.raises(InvalidInput, match="start must be"):
        store.items.claim(1, owner="w", lease=LEASE_S, start=start)  # type: ignore[arg-type]
    assert store.items.counts()[ItemState.PENDING] == 1


@pytest.mark.parametrize(("start", "started"), [(0, 0), (1, 1), (3, 3), (5, 5), (9, 5)])
def test_a_claim_starts_its_first_items_in_claim_order_ties_by_id(
    store: Store, clock: VirtualClock, start: int, started: int
) -> None:
    """``start`` of a claim of 5 (the run_after of all but the last one equal, so their id orders them):
    none, some, all, and more than were claimed (all)."""
    store.items.enqueue_many("call", [(f"k{i}", {"i": i}) for i in range(4)])
    clock.advance(0.001)
    store.items.enqueue_many("call", [("later", {"i": 4})])
    clock.advance(1)
    claimed = store.items.claim(10, owner="w", lease=LEASE_S, start=start)
    assert [item.key for item in claimed] == ["k0", "k1", "k2", "k3", "later"]
    with store.reading() as connection:
        marks = dict(connection.execute(sa.select(work_items.c.id, work_items.c.started)).all())
    assert [bool(marks[item.id]) for item in claimed] == [True] * started + [False] * (5 - started)
