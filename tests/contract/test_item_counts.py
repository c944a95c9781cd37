"""The status counts of work items per kind and state, and what is due, on both backends.

SQLite counts them from the partial indexes of the unfinished states and the (kind, key) index
(``store/item_summaries.py``); these tests hold every state of two kinds and compare the counts with
the items listed one by one.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from vardiya.clock import VirtualClock
from vardiya.store import ItemState, Store


def _fill(store: Store, clock: VirtualClock) -> None:
    store.items.enqueue_many("call:a", ((f"a-{n}", {"n": n}) for n in range(12)))
    store.items.enqueue_many("call:b", ((f"b-{n}", {"n": n}) for n in range(5)))
    store.items.enqueue_many("call:only-done", ((f"c-{n}", {"n": n}) for n in range(3)))
    claimed = store.items.claim(20, owner="w", lease=30)
    by_kind: dict[str, list[int]] = {}
    for item in claimed:
        by_kind.setdefault(item.kind, []).append(item.id)
    a, b, only = by_kind["call:a"], by_kind["call:b"], by_kind["call:only-done"]
    for item in [*a[:4], *b[:1], *only]:
        store.items.complete(item, owner="w")
    for item in a[4:6]:
        store.items.fail(item, owner="w", error="boom")  # final: dead
    store.items.fail(a[6], owner="w", error="later", retry_at=clock.now() + timedelta(hours=1))
    store.items.fail(b[1], owner="w", error="now", retry_at=clock.now())
    # left running: a[7:], b[2:]
    store.items.enqueue_many("call:a", ((f"a-new-{n}", {"n": n}) for n in range(2)))  # pending


def test_counts_by_kind_agree_with_the_items_one_by_one(store: Store, clock: VirtualClock) -> None:
    _fill(store, clock)
    listed = Counter((item.kind, item.state) for item in store.items.list(limit=1000))
    assert store.items.counts_by_kind() == dict(listed)
    assert listed[("call:only-done", ItemState.SUCCEEDED)] == 3
    assert {state for _kind, state in listed} == set(ItemState)


def test_due_by_kind_counts_the_ready_items_due_by_then(store: Store, clock: VirtualClock) -> None:
    _fill(store, clock)
    now = clock.now()
    assert store.items.due_by_kind(now) == {"call:a": 2, "call:b": 1}  # the two new ones; b's retry
    assert store.items.due_by_kind(now + timedelta(hours=2)) == {"call:a": 3, "call:b": 1}
    assert store.items.due_by_kind(now - timedelta(seconds=1)) == {}
