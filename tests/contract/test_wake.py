"""How an idle worker waits on SQLite: it returns at the first commit of any other connection.

``PRAGMA data_version`` read every ``poll_min``; without a commit the wait lasts ``poll_max``, and a
stop ends it at once. The bounds are wide: these tests say what the waker does, the latency itself is
measured by ``benchmarks/bench_latency.py``.
"""

from __future__ import annotations

import threading
import time

import pytest

from vardiya.invoke.wake import DataVersionWaker, waker_for
from vardiya.store import Store

# PostgreSQL workers wait on LISTEN/NOTIFY instead (tests/integration/test_worker_processes.py).
pytestmark = pytest.mark.parametrize("backend", ["sqlite"])


def _timed_wait(waker: DataVersionWaker, stop: threading.Event, timeout: float | None = None) -> float:
    began = time.monotonic()
    waker.wait(stop, timeout=timeout)
    return time.monotonic() - began


def test_a_sqlite_worker_waits_on_data_version(store: Store) -> None:
    waker = waker_for(store, 0.01, 0.25)
    assert isinstance(waker, DataVersionWaker)
    waker.close()


def test_the_wait_ends_at_a_commit_by_another_connection(store: Store) -> None:
    waker = DataVersionWaker(store.target.path, 0.01, 60.0)
    try:
        timer = threading.Timer(0.2, lambda: store.items.enqueue("call:x", {"n": 1}, key="k"))
        timer.start()
        waited = _timed_wait(waker, threading.Event())
        timer.join()
        assert 0.15 <= waited < 20, waited  # woken by the enqueue's commit, not by the 60 s poll_max
        assert store.items.find("call:x", "k") is not None
    finally:
        waker.close()


def test_without_a_commit_the_wait_lasts_poll_max_or_the_timeout(store: Store) -> None:
    waker = DataVersionWaker(store.target.path, 0.01, 0.3)
    try:
        assert 0.25 <= _timed_wait(waker, threading.Event()) < 20
        assert 0.08 <= _timed_wait(waker, threading.Event(), timeout=0.1) < 20
        assert _timed_wait(waker, threading.Event(), timeout=0) < 5
    finally:
        waker.close()


def test_a_stop_ends_the_wait(store: Store) -> None:
    waker = DataVersionWaker(store.target.path, 0.05, 60.0)
    stop = threading.Event()
    try:
        threading.Timer(0.2, stop.set).start()
        assert _timed_wait(waker, stop) < 20
    finally:
        waker.close()
