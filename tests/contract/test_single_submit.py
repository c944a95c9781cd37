"""A small enqueue (a single submit) runs on the driver, off SQLAlchemy's transaction: the same contract.

SQLite writes it on a driver connection of its own, PostgreSQL as one autocommit statement with the
wake-up folded in. These tests say that nothing of the enqueue's contract is lost on that path: the
idempotency key, the wake-up of idle PostgreSQL workers, driver errors as ``StoreError``, and a pooled
connection given back as it was taken.
"""

from __future__ import annotations

import pickle
import select
import threading
import time

import psycopg
import pytest
import sqlalchemy as sa

from vardiya.app import App
from vardiya.clock import VirtualClock
from vardiya.errors import InvalidInput, StoreError, StoreUnavailable
from vardiya.invoke.invoker import Invoker
from vardiya.store import ItemState, Store
from vardiya.store.engine import PostgresStatement
from vardiya.store.url import parse_store_url


def _app() -> App:
    app = App("single")
    app.handler("h", model="async")(lambda record, context: None)
    return app


def test_single_submits_keep_the_idempotency_key_and_mix_with_bulk(store: Store) -> None:
    invoker = Invoker(store, _app())
    first = invoker.submit("h", {"n": 1}, key="order-1")
    again = invoker.submit("h", {"n": 2}, key="order-1")
    assert again.id == first.id
    plain = [invoker.submit("h", {"n": n}) for n in range(5)]
    bulk = invoker.submit_many("h", [{"n": n} for n in range(300)])  # the chunked path
    ids = [first.id, *(handle.id for handle in plain), *(handle.id for handle in bulk)]
    assert len(set(ids)) == len(ids) == 306
    counts = store.items.counts(kind="call:h")
    assert counts[ItemState.PENDING] == 306
    assert store.items.get(first.id).payload == {"record": {"n": 1}}  # the first payload is kept


def test_a_bad_record_writes_nothing_on_the_single_path(store: Store) -> None:
    invoker = Invoker(store, _app())
    with pytest.raises(InvalidInput):
        invoker.submit("h", {"n": object()})
    assert store.items.counts(kind="call:h")[ItemState.PENDING] == 0


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_single_submit_wakes_listening_workers_once_per_new_item(store: Store, postgres_url: str) -> None:
    listener = psycopg.connect(postgres_url.replace("postgresql+psycopg", "postgresql"), autocommit=True)
    try:
        listener.execute("LISTEN vardiya_work")
        invoker = Invoker(store, _app())
        invoker.submit("h", {"n": 1}, key="a")
        assert _notified(listener) == ["call:h"]
        invoker.submit("h", {"n": 1}, key="a")  # nothing new: nobody to wake
        assert _notified(listener, wait=0.3) == []
    finally:
        listener.close()


def _notified(connection: psycopg.Connection, wait: float = 5.0) -> list[str]:
    deadline = time.monotonic() + wait
    payloads: list[str] = []
    while time.monotonic() < deadline and not payloads:
        select.select([connection.fileno()], [], [], max(0.0, deadline - time.monotonic()))
        payloads.extend(notify.payload for notify in connection.notifies(timeout=0, stop_after=10))
    return payloads


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_failing_statement_is_a_store_error_and_the_connection_goes_back_clean(store: Store) -> None:
    statement = PostgresStatement(store.engine, store.target)
    with pytest.raises(StoreError) as raised:
        statement.run(lambda cursor: cursor.execute("SELECT * FROM no_such_table"))
    assert not isinstance(raised.value, StoreUnavailable)
    assert "\n" not in str(raised.value)

    # The pooled connection is back out of autocommit: a rolled-back transaction leaves nothing.
    def rolled_back() -> None:
        with store.transaction() as connection:
            store.items.enqueue_in(connection, [("call:h", "rolled", {}, 3, store.clock.now())], store.clock.now())
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError):
        rolled_back()
    assert store.items.find("call:h", "rolled") is None
    assert Invoker(store, _app()).submit("h", {"n": 1}).id > 0  # and the single path still works


@pytest.mark.parametrize("backend", ["postgresql"])
def test_an_unreachable_server_is_store_unavailable(store: Store) -> None:
    target = parse_store_url("postgresql://postgres@127.0.0.1:1/nothing")
    engine = sa.create_engine("postgresql+psycopg://postgres@127.0.0.1:1/nothing", connect_args={"connect_timeout": 2})
    try:
        with pytest.raises(StoreUnavailable):
            PostgresStatement(engine, target).run(lambda cursor: cursor.execute("SELECT 1"))
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_connection_the_server_dropped_is_unavailable_then_replaced(store: Store, postgres_url: str) -> None:
    invoker = Invoker(store, _app())
    invoker.submit("h", {"n": 0})  # the pool holds a connection now
    with psycopg.connect(postgres_url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    with pytest.raises(StoreUnavailable):
        invoker.submit("h", {"n": 1})
    for _ in range(store.engine.pool.size() + 1):  # each dropped connection is invalidated, not reused
        try:
            handle = invoker.submit("h", {"n": 2})
            break
        except StoreUnavailable:
            continue
    else:
        pytest.fail("the single submit never got a working connection again")
    assert store.items.get(handle.id) is not None


@pytest.mark.parametrize("backend", ["postgresql"])
def test_single_statements_share_one_generic_plan_connection_and_a_busy_one_falls_back_to_the_pool(
    store: Store,
) -> None:
    statement = PostgresStatement(store.engine, store.target)

    def session(cursor: psycopg.Cursor) -> tuple[int, str]:
        row = cursor.execute("SELECT pg_backend_pid(), current_setting('plan_cache_mode')").fetchone()
        assert row is not None
        return row[0], row[1]

    first = statement.run(session)
    assert first[1] == "force_generic_plan"
    assert statement.run(session) == first  # the same connection, not a checkout per call
    inside = threading.Event()
    release = threading.Event()
    seen: list[tuple[int, str]] = []

    def hold(cursor: psycopg.Cursor) -> None:
        seen.append(session(cursor))
        inside.set()
        release.wait(10)

    holder = threading.Thread(target=statement.run, args=(hold,))
    holder.start()
    try:
        assert inside.wait(10)
        other = statement.run(session)  # the own connection is busy: a pooled one, the store's settings
    finally:
        release.set()
        holder.join(10)
    assert seen == [first]
    assert other[0] != first[0] and other[1] == "force_custom_plan"
    store.engine.dispose()  # the own connection is closed with the engine and made again after it
    again = statement.run(session)
    assert again[0] != first[0] and again[1] == "force_generic_plan"


class _SteppingClock(VirtualClock):
    """A virtual clock whose monotonic time moves ``step`` seconds at each read: every call waits."""

    def __init__(self, step: float) -> None:
        super().__init__()
        self._step = step
        self._reads = 0

    def monotonic(self) -> float:
        self._reads += 1
        return self._reads * self._step


def test_the_caller_wait_tally_stays_bounded_however_many_records_are_submitted(store: Store) -> None:
    """A long-lived process that submits and appends must not keep one entry per record (issue 19)."""
    app = _app()
    app.handler("s", model="stream")(lambda records, context: None)
    invoker = Invoker(store, app, clock=_SteppingClock(0.002))
    invoker.submit("h", {"n": 0})
    invoker.append("s", {"n": 0})
    small = len(pickle.dumps(invoker._waits))
    for n in range(200):
        invoker.submit("h", {"n": n})
    invoker.submit_many("h", [{"n": n} for n in range(300)])
    invoker.append_many("s", [{"n": n} for n in range(300)])
    assert len(pickle.dumps(invoker._waits)) == small
    # The mean is what the per-record list gave: 201 single submits of 2 ms each (one step between
    # the two reads of each) and 300 records sharing one 2 ms bulk submit.
    assert invoker.metrics("h").caller_wait_ms == pytest.approx((201 * 2.0 + 2.0) / 501)
    assert invoker.metrics("s").caller_wait_ms == pytest.approx((2.0 + 2.0) / 301)
