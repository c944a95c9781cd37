"""``Handle.result`` / ``Invoker.wait`` on both backends: results, dead letters, timeouts, big results.

The real-time tests run a real worker in a thread on the system clock and check that the wait returns
soon after the worker records the outcome (woken by NOTIFY or ``data_version``, not a fixed poll); the
timeout tests run on the virtual clock, where the wait's time is exact.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from vardiya.app import App
from vardiya.clock import SystemClock, VirtualClock
from vardiya.errors import CallDeadLettered, CallTimedOut, ConfigurationError, InvalidInput, ResultTooLarge
from vardiya.invoke import results
from vardiya.invoke.invoker import Handle, Invoker
from vardiya.invoke.retry import FixedWait, RetryPolicy
from vardiya.service.worker import Worker, WorkerSettings
from vardiya.store import ItemState, Store, open_store
from vardiya.store.hot import RESULT_MAX_BYTES


def _app(gate: threading.Event | None = None) -> App:
    app = App("results")

    @app.handler("double", retry=RetryPolicy(max_attempts=2, wait=FixedWait(seconds=0)))
    def double(record: Any, context: Any) -> Any:
        if gate is not None:
            gate.wait(10)
        if record.get("poison"):
            raise ValueError(f"reading {record['id']} is poison")
        return {"id": record["id"], "twice": record["n"] * 2}

    @app.handler("huge", retry=RetryPolicy(max_attempts=1, wait=FixedWait(seconds=0)))
    def huge(record: Any, context: Any) -> Any:
        return "x" * (RESULT_MAX_BYTES + 10)

    return app


def _run(store: Store, app: App) -> None:
    Worker(store, app, WorkerSettings(heartbeat=False)).run(until_idle=True)


def test_result_is_the_handlers_return_value(store: Store) -> None:
    app = _app()
    invoker = Invoker(store, app)
    handle = invoker.submit("double", {"id": 1, "n": 21})
    _run(store, app)
    assert handle.result(timeout=0) == {"id": 1, "twice": 42}
    assert invoker.wait(handle.id, timeout=timedelta(seconds=1)) == {"id": 1, "twice": 42}
    assert Handle(handle.id, "double") == handle  # equal whichever invoker made it


def test_a_dead_letter_raises_with_its_error_and_where_the_traceback_is(store: Store) -> None:
    app = _app()
    invoker = Invoker(store, app)
    handle = invoker.submit("double", {"id": 7, "n": 1, "poison": True})
    _run(store, app)
    assert invoker.status(handle).state is ItemState.DEAD
    with pytest.raises(CallDeadLettered) as raised:
        handle.result(timeout=5)
    message = str(raised.value)
    assert "reading 7 is poison" in message and f"vardiya dlq show {handle.id}" in message
    assert raised.value.attempts == 2 and raised.value.item_id == handle.id and raised.value.handler == "double"


def test_the_timeout_is_exact_on_the_virtual_clock(store: Store, clock: VirtualClock) -> None:
    invoker = Invoker(store, _app())
    handle = invoker.submit("double", {"id": 1, "n": 1})
    began = clock.monotonic()
    with pytest.raises(CallTimedOut) as raised:
        handle.result(timeout=12.5)
    assert clock.monotonic() - began == pytest.approx(12.5, abs=1e-9)
    assert isinstance(raised.value, TimeoutError) and "pending" in str(raised.value)
    assert invoker.status(handle).state is ItemState.PENDING  # the call is still stored
    began = clock.monotonic()
    with pytest.raises(CallTimedOut):
        handle.result(timeout=0)
    assert clock.monotonic() == began


def test_a_result_over_the_limit_is_dropped_but_the_call_succeeded(store: Store) -> None:
    app = _app()
    invoker = Invoker(store, app)
    handle = invoker.submit("huge", {"id": 1})
    _run(store, app)
    assert invoker.status(handle).state is ItemState.SUCCEEDED
    with pytest.raises(ResultTooLarge, match=f"keeps up to {RESULT_MAX_BYTES}"):
        handle.result(timeout=0)


def test_bad_waits_are_refused(store: Store) -> None:
    invoker = Invoker(store, _app())
    handle = invoker.submit("double", {"id": 1, "n": 1})
    for timeout in (-1, "5", float("nan"), True):
        with pytest.raises(InvalidInput):
            invoker.wait(handle, timeout=timeout)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="no async invocation has handle 999"):
        invoker.wait(999, timeout=0)
    with pytest.raises(ConfigurationError, match="without an Invoker"):
        Handle(handle.id, "double").result(timeout=0)


def test_the_wait_returns_when_a_real_worker_finishes(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker thread runs the call 0.3 s after the wait begins; the wait returns within moments of it.

    The wait's safety-net sleep is made 30 s long, so only the store's wake-up can end it sooner.
    """
    monkeypatch.setattr(results, "POLL_MAX_S", 30.0)
    gate = threading.Event()
    app = _app(gate)
    store = open_store(store_url, clock=SystemClock())
    worker_store = open_store(store_url, clock=SystemClock())
    worker = Worker(worker_store, app, WorkerSettings(poll_min=0.005, poll_max=0.05))
    thread = threading.Thread(target=worker.run, daemon=True)
    try:
        invoker = Invoker(store, app)
        handle = invoker.submit("double", {"id": 3, "n": 5})
        poison = invoker.submit("double", {"id": 4, "n": 5, "poison": True})
        thread.start()
        opened = threading.Timer(0.3, gate.set)
        began = time.monotonic()
        opened.start()
        assert handle.result(timeout=30) == {"id": 3, "twice": 10}
        waited = time.monotonic() - began
        assert 0.25 <= waited < 10, waited  # woken by the completion, not by the 30 s sleep
        with pytest.raises(CallDeadLettered, match="reading 4 is poison"):
            poison.result(timeout=30)
    finally:
        gate.set()
        worker.stop()
        thread.join(10)
        store.close()
        worker_store.close()
