"""Dedup keys: duplicates inside the window get the stored outcome; dead-lettered keys do not expire."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from vardiya.clock import VirtualClock
from vardiya.errors import InvalidInput
from vardiya.store import DedupOutcome, ItemState, Store
from vardiya.store.schema import dedup_keys


def _key_rows(store: Store) -> int:
    with store.engine.connect() as connection:
        return connection.execute(sa.select(sa.func.count()).select_from(dedup_keys)).scalar_one()


def _dead_item(store: Store, key: str) -> int:
    item = store.items.enqueue("call", {"key": key}, key=key, max_attempts=1)
    (claimed,) = store.items.claim(1, owner="w", lease=30)
    assert claimed.id == item.id
    assert store.items.fail(item.id, owner="w", error="the API said no") is ItemState.DEAD
    return item.id


def test_first_check_takes_the_key_second_is_a_duplicate(store: Store, clock: VirtualClock) -> None:
    assert store.dedup.check("orders", "order-1", window=3600) is None
    store.dedup.settle("orders", "order-1", outcome=DedupOutcome.SUCCEEDED, result={"invoice": 17})
    clock.advance(60)

    duplicate = store.dedup.check("orders", "order-1", window=3600)

    assert duplicate is not None
    assert duplicate.key == "order-1"
    assert duplicate.outcome is DedupOutcome.SUCCEEDED
    assert duplicate.result == {"invoice": 17}
    assert duplicate.first_seen == clock.now() - timedelta(seconds=60)
    assert duplicate.expires_at == duplicate.first_seen + timedelta(hours=1)
    assert store.dedup.is_live("orders", "order-1")
    assert store.dedup.check("refunds", "order-1", window=3600) is None  # scopes are separate
    assert _key_rows(store) == 2


def test_duplicate_before_settle_is_pending(store: Store) -> None:
    store.dedup.check("orders", "o", window=60)

    duplicate = store.dedup.check("orders", "o", window=60)

    assert duplicate is not None and duplicate.outcome is DedupOutcome.PENDING


def test_key_is_taken_again_after_its_window(store: Store, clock: VirtualClock) -> None:
    store.dedup.check("orders", "o", window=timedelta(minutes=10))
    store.dedup.settle("orders", "o", outcome=DedupOutcome.FAILED)
    clock.advance(599)
    assert store.dedup.is_live("orders", "o")
    clock.advance(1)

    assert not store.dedup.is_live("orders", "o")
    assert store.dedup.check("orders", "o", window=60) is None

    taken = store.dedup.get("orders", "o")
    assert (taken.first_seen, taken.expires_at) == (clock.now(), clock.now() + timedelta(seconds=60))
    assert taken.outcome is DedupOutcome.PENDING
    assert store.dedup.check("orders", "o", window=60) is not None
    assert _key_rows(store) == 1


def test_expire_deletes_only_expired_keys(store: Store, clock: VirtualClock) -> None:
    store.dedup.check("s", "short", window=10)
    store.dedup.check("s", "long", window=100)
    clock.advance(50)

    assert store.dedup.expire() == 1

    assert store.dedup.get("s", "short") is None
    assert store.dedup.get("s", "long") is not None
    clock.advance(50)
    assert store.dedup.expire() == 1
    assert _key_rows(store) == 0


def test_key_of_a_dead_item_stays_live_past_its_window(store: Store, clock: VirtualClock) -> None:
    dead = _dead_item(store, "order-9")
    store.dedup.check("orders", "order-9", window=60)
    store.dedup.attach("orders", "order-9", dead)
    store.dedup.check("orders", "plain", window=60)
    clock.advance(3600)

    assert store.dedup.is_live("orders", "order-9")
    assert not store.dedup.is_live("orders", "plain")
    assert store.dedup.expire() == 1  # "plain" goes, "order-9" stays

    kept = store.dedup.get("orders", "order-9")
    assert kept is not None and kept.item_id == dead
    assert store.dedup.check("orders", "order-9", window=60) is not None
    assert store.dedup.get("orders", "plain") is None


def test_key_attached_to_a_live_item_expires_normally(store: Store, clock: VirtualClock) -> None:
    item = store.items.enqueue("call", {}, key="k")
    store.dedup.check("orders", "o", window=60, item_id=item.id)
    clock.advance(61)

    assert not store.dedup.is_live("orders", "o")
    assert store.dedup.expire() == 1


def test_key_expires_once_its_dead_item_is_redriven(store: Store, clock: VirtualClock) -> None:
    dead = _dead_item(store, "order-9")
    store.dedup.check("orders", "order-9", window=60, item_id=dead)
    clock.advance(3600)
    assert store.dedup.expire() == 0

    assert store.items.redrive([dead]) == 1

    assert not store.dedup.is_live("orders", "order-9")
    assert store.dedup.expire() == 1
    assert store.dedup.get("orders", "order-9") is None


def test_key_expires_once_its_dead_item_is_purged(store: Store, clock: VirtualClock) -> None:
    dead = _dead_item(store, "order-9")
    store.dedup.check("orders", "order-9", window=60)
    store.dedup.attach("orders", "order-9", dead)
    clock.advance(3600)
    assert store.dedup.is_live("orders", "order-9")

    assert store.items.purge([dead]) == 1

    assert store.dedup.get("orders", "order-9").item_id is None
    assert not store.dedup.is_live("orders", "order-9")
    assert store.dedup.expire() == 1


@pytest.mark.parametrize("window", [0, -1, timedelta(0), timedelta(seconds=-5)])
def test_window_must_be_positive(store: Store, window: float | timedelta) -> None:
    with pytest.raises(InvalidInput, match="window"):
        store.dedup.check("orders", "o", window=window)
    assert _key_rows(store) == 0
