"""A bulk submit of records given no key goes in by COPY on PostgreSQL (``HotSQL.copy_fresh``).

COPY cannot skip a key that exists, so what must hold is the statement's contract whichever path
wrote: every item and its key row written, payloads and keys byte for byte (COPY's text format
escapes backslashes), an existing key kept with its first item (the COPY fails and the statement
runs in the same transaction), idle workers woken, and handles and results for every record.
"""

from __future__ import annotations

import select
import time

import psycopg
import pytest
import sqlalchemy as sa

from vardiya.app import App
from vardiya.invoke.invoker import Invoker
from vardiya.store import ItemState, Store
from vardiya.store.schema import work_item_keys, work_items


def _app() -> App:
    app = App("copy")
    app.handler("h", model="async")(lambda record, context: None)
    return app


def _keys_and_items(store: Store) -> tuple[int, int]:
    with store.reading() as connection:
        items = connection.execute(sa.select(sa.func.count()).select_from(work_items)).scalar_one()
        keys = connection.execute(sa.select(sa.func.count()).select_from(work_item_keys)).scalar_one()
    return items, keys


def test_a_bulk_submit_without_keys_writes_every_item_and_key_with_its_payload(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    copies = _count_copies(store, monkeypatch)
    records = [{"n": n, "text": "tab\t back\\slash \"quote\" é\n line"} for n in range(450)]
    handles = Invoker(store, _app()).submit_many("h", records)
    assert len({handle.id for handle in handles}) == 450
    for handle, record in zip(handles[::50], records[::50], strict=True):
        item = store.items.get(handle.id)
        assert item.payload == {"record": record} and item.state is ItemState.PENDING
        assert store.items.find("call:h", item.key).id == handle.id  # the key finds its item
    items, keys = _keys_and_items(store)
    assert items == 450 and keys == (450 if store.backend.value == "postgresql" else 0)
    assert copies == ([True] if store.backend.value == "postgresql" else [])  # one chunk of 2,000


def _count_copies(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each ``copy_fresh`` call wrote (True) or left the chunk to the statement (False)."""
    hot = store.items._hot
    outcomes: list[bool] = []
    original = hot.copy_fresh

    def counted(*args: object, **kwargs: object) -> object:
        made = original(*args, **kwargs)  # type: ignore[arg-type]
        outcomes.append(made is not None)
        return made

    monkeypatch.setattr(hot, "copy_fresh", counted)
    return outcomes


def test_fresh_keys_that_exist_after_all_keep_their_items(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller key equal to a 'fresh' one: the COPY fails, the statement keeps the first item."""
    copies = _count_copies(store, monkeypatch)
    first = store.items.enqueue_texts_ids("call:h", [(f"k\\{n}", f'{{"record":{n}}}') for n in range(150)])
    pairs = [(f"k\\{n}", '{"record":"again"}') for n in range(100, 300)]
    made = store.items.enqueue_texts_ids("call:h", pairs, fresh_keys=True, chunk_size=120)
    assert sorted(made) == sorted(f"k\\{n}" for n in range(150, 300))
    assert store.items.find("call:h", "k\\120").id == first["k\\120"]
    assert store.items.get(first["k\\120"]).payload == {"record": 120}
    assert store.items.find("call:h", "k\\299").payload == {"record": "again"}
    items, keys = _keys_and_items(store)
    assert items == 300 and keys == (300 if store.backend.value == "postgresql" else 0)
    # PostgreSQL: the first chunk (keys 100-219) met existing keys, the second (220-299) was copied
    assert copies == ([False, True] if store.backend.value == "postgresql" else [])


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_bulk_submit_by_copy_wakes_listening_workers(store: Store, postgres_url: str) -> None:
    listener = psycopg.connect(postgres_url.replace("postgresql+psycopg", "postgresql"), autocommit=True)
    try:
        listener.execute("LISTEN vardiya_work")
        Invoker(store, _app()).submit_many("h", [{"n": n} for n in range(300)])
        deadline = time.monotonic() + 5.0
        payloads: list[str] = []
        while time.monotonic() < deadline and not payloads:
            select.select([listener.fileno()], [], [], max(0.0, deadline - time.monotonic()))
            payloads.extend(notify.payload for notify in listener.notifies(timeout=0, stop_after=10))
        assert payloads == ["call:h"]
    finally:
        listener.close()


def test_a_bulk_submit_by_copy_takes_10_000_items_a_transaction_unless_told(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By COPY, 10,000 items a transaction (a commit, a wake-up and an id query each); the statement's
    path 2,000 a transaction; a chunk size the caller names is kept on both."""
    copies = _count_copies(store, monkeypatch)
    transactions = 0
    begin = store.transaction

    def counted_transaction() -> object:
        nonlocal transactions
        transactions += 1
        return begin()

    monkeypatch.setattr(store, "transaction", counted_transaction)
    Invoker(store, _app()).submit_many("h", [{"n": n} for n in range(12_500)])
    postgres = store.backend.value == "postgresql"
    assert (transactions, copies) == ((2, [True, True]) if postgres else (7, []))
    transactions = 0
    pairs = [(f"k{n}", f'{{"record":{n}}}') for n in range(2_500)]
    store.items.enqueue_texts_ids("call:h", pairs, fresh_keys=True, chunk_size=1_000)
    assert transactions == 3
    transactions = 0
    store.items.enqueue_texts_ids("call:h", [(f"s{n}", "{}") for n in range(2_500)])  # the statement's path
    assert transactions == 2
    assert _keys_and_items(store) == (17_500, 17_500 if postgres else 0)
