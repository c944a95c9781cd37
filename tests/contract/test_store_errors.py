"""The store boundary: driver errors from a reachable database become a StoreError, not "unavailable"."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from vardiya.errors import StoreError, StoreUnavailable
from vardiya.store import Store


def test_lock_wait_that_gives_up_is_a_store_error_not_unavailable(store: Store, backend: str) -> None:
    holder = store.engine.connect()
    try:
        holder.begin()  # BEGIN IMMEDIATE on SQLite: holds the write lock
        holder.exec_driver_sql("UPDATE work_items SET attempts = attempts")
        if backend == "postgresql":
            holder.exec_driver_sql("LOCK TABLE work_items IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(StoreError) as raised, store.reading() as connection:  # noqa: PT012 - a lock timeout set, then hit
            if backend == "postgresql":
                connection.exec_driver_sql("SET LOCAL lock_timeout = '50ms'")
                connection.exec_driver_sql("SELECT count(*) FROM work_items")
            else:
                connection.exec_driver_sql("PRAGMA busy_timeout = 50")
                connection.exec_driver_sql("DELETE FROM work_items")
    finally:
        holder.rollback()
        holder.close()

    assert not isinstance(raised.value, StoreUnavailable), str(raised.value)
    assert "\n" not in str(raised.value)
    assert isinstance(raised.value.__cause__, sa.exc.OperationalError)
    assert store.items.enqueue("call", {}, key="after").attempts == 0  # the store still works
