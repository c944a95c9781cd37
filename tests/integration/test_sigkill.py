"""A worker killed with SIGKILL while it holds leases: its items come back, counted, and cannot loop."""

from __future__ import annotations

from datetime import timedelta

from vardiya.clock import SystemClock, VirtualClock
from vardiya.store import AttemptOutcome, ItemState, open_store

from ..support.processes import run_then_kill
from ..support.workers import claim_then_hang

LEASE_S = 30.0


def _kill_while_holding(store_url: str, owner: str, n: int) -> list[int]:
    """Spawn a worker that claims ``n`` items and hangs; SIGKILL it once it holds them. Returns their ids."""
    return list(run_then_kill(claim_then_hang, (store_url, owner, n, LEASE_S), name="doomed-worker", timeout=60))


def _after_the_lease() -> VirtualClock:
    """A clock past any lease the killed worker took: real now + 60 s, moved by hand from there."""
    return VirtualClock(SystemClock().now() + timedelta(seconds=2 * LEASE_S))


def test_items_of_a_killed_worker_are_reclaimed(store_url: str) -> None:
    with open_store(store_url) as store:
        store.items.enqueue_many("call", [(f"k{i}", {"i": i}) for i in range(25)], max_attempts=3)

    held = _kill_while_holding(store_url, "doomed-worker", 20)
    assert len(held) == 20

    clock = _after_the_lease()
    with open_store(store_url, clock=clock) as store:
        assert store.items.counts()[ItemState.RUNNING] == 20  # nobody released them: the worker just died
        reclaimed = store.items.claim(25, owner="rescuer", lease=LEASE_S)

        by_id = {item.id: item for item in reclaimed}
        assert set(held) <= set(by_id)
        assert len(by_id) == 25  # the 5 never claimed come along
        assert {by_id[item_id].attempts for item_id in held} == {2}
        for item_id in held:
            (expired,) = store.items.history(item_id)
            assert (expired.attempt, expired.owner) == (1, "doomed-worker")
            assert expired.outcome is AttemptOutcome.LEASE_EXPIRED
            assert expired.ended_at < clock.now()
            assert "doomed-worker" in (by_id[item_id].last_error or "")

        assert store.items.complete_many(list(by_id), owner="rescuer") == set()

        assert store.items.counts() == {state: 25 if state is ItemState.SUCCEEDED else 0 for state in ItemState}
        for item_id in held:
            assert [(a.attempt, a.outcome, a.owner) for a in store.items.history(item_id)] == [
                (1, AttemptOutcome.LEASE_EXPIRED, "doomed-worker"),
                (2, AttemptOutcome.SUCCEEDED, "rescuer"),
            ]


def test_item_whose_worker_is_killed_every_time_ends_dead(store_url: str) -> None:
    with open_store(store_url) as store:
        item = store.items.enqueue("call", {"poison": True}, key="poison", max_attempts=3)

    assert _kill_while_holding(store_url, "killed-1", 5) == [item.id]

    # The next two workers die the same way; their lease expiries are replayed on a virtual clock.
    clock = _after_the_lease()
    with open_store(store_url, clock=clock) as store:
        for attempt in (2, 3):
            (claimed,) = store.items.claim(1, owner=f"killed-{attempt}", lease=LEASE_S)
            assert (claimed.id, claimed.attempts) == (item.id, attempt)
            clock.advance(LEASE_S + 1)
            assert store.items.reap() == 1

        dead = store.items.get(item.id)
        assert (dead.state, dead.attempts, dead.payload) == (ItemState.DEAD, 3, {"poison": True})
        clock.advance(timedelta(days=1))
        assert store.items.claim(1, owner="next", lease=LEASE_S) == []
        assert [(a.attempt, a.outcome, a.owner) for a in store.items.history(item.id)] == [
            (1, AttemptOutcome.LEASE_EXPIRED, "killed-1"),
            (2, AttemptOutcome.LEASE_EXPIRED, "killed-2"),
            (3, AttemptOutcome.LEASE_EXPIRED, "killed-3"),
        ]
