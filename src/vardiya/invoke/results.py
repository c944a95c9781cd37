"""Waiting for an async call's result: ``Handle.result(timeout=...)``, ``Invoker.wait(handle, timeout=...)``.

What a Celery user has in ``AsyncResult.get`` and a Lambda user builds around an async invocation: the
caller submitted, went on, and now wants the handler's return value. The wait

- returns the stored result as soon as the item has ``succeeded``;
- raises ``CallDeadLettered`` once it is ``dead`` (the last error line, and where the traceback is:
  ``vardiya dlq show ID``); a failed attempt with attempts left is waited through, as the engine retries;
- raises ``CallTimedOut`` when ``timeout`` seconds of the injected clock pass first (the call stays
  stored and may still finish); ``timeout=None`` waits as long as it takes;
- raises ``ResultTooLarge`` when the call succeeded but its result was over the size the store keeps.

It sleeps through the clock (``Clock.wait``) on the store's own wake-up, so it never polls at a fixed
pace: on PostgreSQL a ``LISTEN`` on ``DONE_CHANNEL``, which every completion and dead letter signals at
commit; on SQLite ``PRAGMA data_version``, which changes at any other connection's commit. Each wake
(or ``poll_max`` at the latest, the safety net of a lost notification) costs one read of the item. On a
``VirtualClock`` the wait moves virtual time instead, so a timeout is exact to the microsecond.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from ..clock import Clock, to_seconds
from ..errors import CallDeadLettered, CallTimedOut, InvalidInput, ResultTooLarge
from ..store.hot import DONE_CHANNEL, RESULT_DROPPED
from ..store.records import ItemState, WorkItem
from ..store.url import Backend
from .handlers import CALL_PREFIX
from .wake import DataVersionWaker, PollWaker

if TYPE_CHECKING:
    from datetime import timedelta

    from ..store.api import Store

__all__ = ["ResultWaiter", "check_timeout", "outcome_of"]

log = logging.getLogger("vardiya.invoke")

#: The longest one sleep lasts without a wake-up (a notification lost with a dropped connection).
POLL_MAX_S = 1.0
#: How often SQLite's ``data_version`` is read while waiting.
POLL_MIN_S = 0.005


def check_timeout(timeout: float | timedelta | None) -> float | None:
    """``timeout`` in seconds (None: no limit); a negative or non-number one is an ``InvalidInput``."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or (not isinstance(timeout, int | float) and not hasattr(timeout, "total_seconds")):
        raise InvalidInput(f"a wait's timeout must be a number of seconds, a timedelta or None, got {timeout!r}")
    seconds = to_seconds(timeout)
    if not seconds >= 0:  # NaN too
        raise InvalidInput(f"a wait's timeout must be 0 or more seconds, got {timeout!r}")
    return seconds


def outcome_of(item: WorkItem) -> tuple[bool, Any]:
    """(finished, result) of a call item: the result when it succeeded; raises when it ended otherwise."""
    handler = item.kind.removeprefix(CALL_PREFIX)
    if item.state is ItemState.SUCCEEDED:
        result = item.result
        if isinstance(result, dict) and set(result) == {RESULT_DROPPED}:
            dropped = result[RESULT_DROPPED]
            raise ResultTooLarge(
                f"call {item.id} of handler {handler!r} succeeded, but its result was {dropped['bytes']} bytes of "
                f"JSON and the store keeps up to {dropped['limit']}; return a reference (a path, a key) instead",
                item_id=item.id,
                handler=handler,
            )
        return True, result
    if item.state is ItemState.DEAD:
        raise CallDeadLettered(
            f"call {item.id} of handler {handler!r} is a dead letter after {item.attempts} attempt(s): "
            f"{item.last_error or 'failed'}; the traceback and every attempt: vardiya dlq show {item.id}",
            item_id=item.id,
            handler=handler,
            error=item.last_error,
            attempts=item.attempts,
        )
    return False, None


class _ListenWake:
    """``LISTEN DONE_CHANNEL`` on a connection of its own; ``wait`` returns at the first notification."""

    def __init__(self, store: Store) -> None:
        import psycopg

        url = store.engine.url.set(drivername="postgresql")
        self._connection: Any = psycopg.connect(
            url.render_as_string(hide_password=False), autocommit=True, connect_timeout=5
        )
        self._connection.execute(f"LISTEN {DONE_CHANNEL}")

    def wait(self, stop: threading.Event, timeout: float | None = None) -> None:
        del stop  # nothing stops a caller's wait but its own timeout
        woke = False
        for _ in self._connection.notifies(timeout=timeout, stop_after=1):
            woke = True
        if woke:  # one wake-up serves every completion already signalled
            for _ in self._connection.notifies(timeout=0, stop_after=1000):
                pass

    def close(self) -> None:
        try:
            self._connection.close()
        except Exception:
            log.debug("closing the LISTEN connection failed", exc_info=True)


class ResultWaiter:
    """Waits for call items of one store to end; opened for one wait (``Invoker.wait``), then closed.

    The wake-up source is opened before the first read of the item, so a completion committed between
    that read and the sleep still wakes the sleep (LISTEN is registered; ``data_version`` is read first).
    """

    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._never = threading.Event()
        self._wake: _ListenWake | DataVersionWaker | PollWaker
        if store.backend is Backend.POSTGRESQL:
            self._wake = _ListenWake(store)
        elif store.target.path is not None:
            self._wake = DataVersionWaker(store.target.path, POLL_MIN_S, POLL_MAX_S)
        else:
            self._wake = PollWaker(POLL_MIN_S, POLL_MAX_S)

    def _sleep(self, seconds: float) -> None:
        self._wake.wait(self._never, timeout=seconds)

    def wait(self, item_id: int, timeout: float | None) -> Any:
        """The result of call ``item_id`` (see the module doc for what it raises)."""
        clock = self._clock
        deadline = None if timeout is None else clock.monotonic() + timeout
        while True:
            item = self._store.items.get(item_id)
            if item is None or not item.kind.startswith(CALL_PREFIX):
                raise InvalidInput(
                    f"no async invocation has handle {item_id} (purged, or never submitted); handles come from submit()"
                )
            finished, result = outcome_of(item)
            if finished:
                return result
            step = POLL_MAX_S
            if deadline is not None:
                remaining = deadline - clock.monotonic()
                if remaining <= 0:
                    handler = item.kind.removeprefix(CALL_PREFIX)
                    raise CallTimedOut(
                        f"call {item_id} of handler {handler!r} had not finished after {timeout:g} s "
                        f"(it is {item.state.value}, attempt {item.attempts} of {item.max_attempts}); it is still "
                        f"stored and may finish later: wait again, or see vardiya invoke status {item_id}",
                        item_id=item_id,
                        handler=handler,
                    )
                step = min(step, remaining)
            clock.wait(step, self._sleep)

    def close(self) -> None:
        self._wake.close()
