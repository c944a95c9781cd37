"""Idempotency keys: on PostgreSQL in ``work_item_keys`` (migration 0007), one key row per item written
with it; on SQLite the item row's own unique (kind, key) index (migration 0015), the key table empty.

What must hold on both backends: every item has exactly one key (PostgreSQL: one key row, SQLite:
none beside the item); the same (kind, key) is one item however many callers enqueue it at once; a
purged item frees its key; a store migrated from 0006 keeps every key it had, and one migrated from
0013 on SQLite loses none of its keys with its key rows; and PostgreSQL's ``work_items`` no longer
carries the (kind, key) index that every claim and completion used to rewrite.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import sqlalchemy as sa

from tests.support.migrations import at_revision
from vardiya.clock import VirtualClock
from vardiya.store import ItemState, Store, open_store
from vardiya.store.hot import hot_sql
from vardiya.store.schema import work_item_keys, work_items
from vardiya.store.streams import Streams
from vardiya.store.url import Backend


def _key_rows(store: Store) -> list[tuple[str, str, int]]:
    """(kind, key, item id) of every row of ``work_item_keys``, sorted."""
    k = work_item_keys.c
    with store.reading() as connection:
        keys = connection.execute(sa.select(k.kind, k.key, k.item_id).order_by(k.kind, k.key)).all()
    return [tuple(row) for row in keys]


def _pairs(store: Store) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, int]]]:
    """(kind, key, id) of every item, and the (kind, key, item id) of every item's key, both sorted.

    The keys are the key rows on PostgreSQL; on SQLite, where the item row is its own key, the key
    table must be empty and the items' keys are the items themselves.
    """
    w = work_items.c
    with store.reading() as connection:
        items = [tuple(row) for row in connection.execute(sa.select(w.kind, w.key, w.id).order_by(w.kind, w.key))]
    keys = _key_rows(store)
    if store.backend is Backend.SQLITE:
        assert keys == []
        return items, items
    return items, keys


def test_every_way_of_adding_an_item_writes_its_key_row(store: Store, clock: VirtualClock) -> None:
    store.items.enqueue("tick", {"n": 1}, key="a")
    store.items.enqueue("tick", {"n": 1})  # a random key
    store.items.enqueue_many("tick", [("b", 2), ("c", 3), ("a", 9)])
    store.items.enqueue_many_ids("other", [("a", 1)], run_after=clock.now() + timedelta(seconds=5))
    streams = Streams(store)
    streams.append_many("readings", [(None, {"n": n}) for n in range(3)])
    assert streams.cut(
        "readings", kind="batch:readings", batch_size=3, window_s=0, max_attempts=3, ordered=False, lanes=1
    ) == 1

    items, keys = _pairs(store)
    assert len(items) == 6
    assert items == keys
    (batch,) = [row for row in items if row[0] == "batch:readings"]
    assert store.items.find("batch:readings", batch[1]).id == batch[2]


def test_find_goes_through_the_key_and_knows_the_kind(store: Store) -> None:
    item = store.items.enqueue("tick", {"n": 1}, key="k")
    assert store.items.find("tick", "k") == item
    assert store.items.find("tock", "k") is None
    assert store.items.find("tick", "nope") is None


def test_callers_enqueueing_the_same_keys_at_once_make_one_item_per_key(store_url: str, clock: VirtualClock) -> None:
    """Eight threads, each with its own store (its own connections), enqueue overlapping key sets."""
    keys = [f"k{n}" for n in range(300)]
    results: list[dict[str, int]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def enqueue(offset: int) -> None:
        store = open_store(store_url, clock=clock)
        try:
            start.wait()
            mine = keys[offset * 25 : offset * 25 + 150]
            new = store.items.enqueue_many_ids("tick", [(key, {"by": offset}) for key in mine], chunk_size=40)
            results.append(new)
            for key in mine:  # every caller finds every key of its own, new or not
                assert store.items.find("tick", key) is not None
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            store.close()

    threads = [threading.Thread(target=enqueue, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    store = open_store(store_url, clock=clock)
    try:
        items, key_rows = _pairs(store)
    finally:
        store.close()
    covered = sorted({key for offset in range(8) for key in keys[offset * 25 : offset * 25 + 150]})
    assert sorted(key for _kind, key, _id in items) == covered
    assert items == key_rows
    # each key was new for exactly one caller, with the id the item has
    made = [(key, item_id) for new in results for key, item_id in new.items()]
    assert sorted(made) == sorted((key, item_id) for _kind, key, item_id in items)


def test_purging_a_dead_item_frees_its_key(store: Store) -> None:
    item = store.items.enqueue("dlq", {"v": 1}, key="poison", max_attempts=1)
    (claimed,) = store.items.claim(1, owner="w", lease=30)
    store.items.fail(claimed.id, owner="w", error="bad reading")
    assert store.items.get(item.id).state is ItemState.DEAD
    kept = store.items.enqueue("dlq", {"v": 1}, key="kept", max_attempts=1)

    assert store.items.purge([item.id, kept.id]) == 1

    assert store.items.find("dlq", "poison") is None
    again = store.items.enqueue("dlq", {"v": 2}, key="poison")
    assert again.id != item.id and again.payload == {"v": 2}
    items, keys = _pairs(store)
    assert items == keys == sorted([("dlq", "kept", kept.id), ("dlq", "poison", again.id)])


def test_upgrading_from_0006_gives_every_existing_item_its_key(store: Store) -> None:
    with at_revision(store, "0006") as connection:
        inspector = sa.inspect(connection)
        assert "work_item_keys" not in inspector.get_table_names()
        uniques = {tuple(u["column_names"]) for u in inspector.get_unique_constraints("work_items")}
        assert ("kind", "key") in uniques  # PostgreSQL got its constraint back
        # items written by a 0006 store, which had no key table
        written = hot_sql(store.backend).item_time(store.clock.now())
        connection.execute(
            sa.text(
                "INSERT INTO work_items (kind, key, payload, state, attempts, max_attempts, run_after,"
                " created_at, updated_at) VALUES (:kind, :key, '{}', 'pending', 0, 3, :t, :t, :t)"
            ),
            [{"kind": "tick", "key": f"old-{n}", "t": written} for n in range(5)],
        )
        connection.commit()

    items, keys = _pairs(store)
    assert len(items) == 5 and items == keys
    assert [store.items.find("tick", f"old-{n}").id for n in range(5)] == [row[2] for row in items]
    old = store.items.enqueue("tick", {"new": True}, key="old-3")
    assert old.payload == {} and old.id == store.items.find("tick", "old-3").id
    assert store.items.enqueue_many("tick", [("old-1", {}), ("new-1", {})]) == 1


def test_upgrading_from_0013_keeps_every_key_and_sqlite_leaves_its_key_rows(store: Store) -> None:
    """Migration 0015: SQLite's key rows go (the items' unique index is the key); PostgreSQL keeps them;
    on both, every key still finds its item and stops a second one, and the downgrade gives them back."""
    with at_revision(store, "0013") as connection:
        written = hot_sql(store.backend).item_time(store.clock.now())
        for n in range(4):  # items and key rows as a 0013 store wrote them
            (item_id,) = connection.execute(
                sa.text(
                    "INSERT INTO work_items (kind, key, payload, state, attempts, max_attempts, run_after,"
                    " created_at, updated_at) VALUES ('call:h', :key, '{}', 'pending', 0, 3, :t, :t, :t)"
                    " RETURNING id"
                ),
                {"key": f"k{n}", "t": written},
            ).one()
            connection.execute(
                sa.text("INSERT INTO work_item_keys (kind, key, item_id) VALUES ('call:h', :key, :id)"),
                {"key": f"k{n}", "id": item_id},
            )
        connection.commit()

    items, keys = _pairs(store)  # on SQLite this asserts the key rows are gone
    assert len(items) == 4 and items == keys
    assert len(_key_rows(store)) == (0 if store.backend is Backend.SQLITE else 4)
    assert store.items.enqueue_many_ids("call:h", [("k1", {"again": True}), ("k9", {})]).keys() == {"k9"}
    assert store.invocations.ids_by_key("call:h", ["k0", "k1", "k9", "none"]).keys() == {"k0", "k1", "k9"}
    assert store.items.find("call:h", "k2").payload == {}

    with at_revision(store, "0013"):  # down to 0013 and up again: SQLite's key rows come back, then go
        assert len(_key_rows(store)) == 5
    assert len(_key_rows(store)) == (0 if store.backend is Backend.SQLITE else 5)


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_single_submit_on_sqlite_is_one_autocommit_statement(store: Store) -> None:
    """SQLite's single submit: one driver statement, no transaction left open, the key kept by the item."""
    statements: list[str] = []
    first = store.items.enqueue_text_id("call:h", "order-1", '{"record":1}')
    driver = store.items._submit_driver
    assert driver is not None
    connection, _cursor = driver._open()
    connection.set_trace_callback(statements.append)
    try:
        again = store.items.enqueue_text_id("call:h", "order-1", '{"record":2}')
        other = store.items.enqueue_text_id("call:h", "order-2", '{"record":3}')
    finally:
        connection.set_trace_callback(None)
    assert not connection.in_transaction
    on_driver = [text for text in statements if "work_items" in text]
    assert len(on_driver) == 2 and not any(text.strip().upper().startswith(("BEGIN", "COMMIT")) for text in statements)
    assert again == first != other
    assert store.items.get(first).payload == {"record": 1}  # the first payload is kept
    assert store.items.find("call:h", "order-2").id == other
