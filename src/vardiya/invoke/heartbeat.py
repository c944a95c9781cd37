"""A worker's lease heartbeat: one thread that keeps the leases of the items in hand alive.

The items a worker holds (claimed, not yet finished) are registered here by whoever runs them; every
third of the lease the thread extends all their leases in one statement. A worker killed with SIGKILL
stops beating, its leases run out and another worker reclaims the items: that is the whole crash story,
so a missed beat is logged and retried, never fatal (the lease has slack for two more).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..store.api import Store

__all__ = ["LeaseHeartbeat"]

log = logging.getLogger("vardiya.worker")

#: The shortest time between beats, however short the lease: a beat is a write.
_MIN_INTERVAL_S = 0.05


class LeaseHeartbeat:
    """The items one worker holds, and the thread that extends their leases while it runs."""

    def __init__(
        self, store: Store, *, owner: str, lease_s: float, enabled: bool = True,
        also: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        #: Called on every beat, items held or not: the worker's own row in the services table, so a
        #: worker deep in a long call still shows as alive.
        self.also = also
        self.owner = owner
        self.lease_s = lease_s
        self.enabled = enabled
        self._held: set[int] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def interval_s(self) -> float:
        """Seconds between beats: a third of the lease, so two beats can fail before it runs out."""
        return max(_MIN_INTERVAL_S, self.lease_s / 3)

    def hold(self, ids: Iterable[int]) -> None:
        with self._lock:
            self._held.update(ids)

    def drop(self, ids: Iterable[int]) -> None:
        with self._lock:
            self._held.difference_update(ids)

    @contextlib.contextmanager
    def holding(self, ids: Iterable[int]) -> Iterator[None]:
        """Keep the leases of ``ids`` alive while the block runs."""
        ids = list(ids)
        self.hold(ids)
        try:
            yield
        finally:
            self.drop(ids)

    def held(self) -> list[int]:
        with self._lock:
            return sorted(self._held)

    def beat(self) -> None:
        """Extend every held lease once (the thread's step; a test may call it directly)."""
        if self.also is not None:
            self.also()
        held = self.held()
        if not held:
            return
        try:
            self.store.items.heartbeat(held, owner=self.owner, lease=self.lease_s)
        except Exception:
            log.warning("heartbeat failed for %d item(s)", len(held), exc_info=True)

    def start(self, stop: threading.Event) -> None:
        """Beat every ``interval_s`` until ``stop`` is set (nothing when the heartbeat is off)."""
        if not self.enabled:
            return

        def loop() -> None:
            while not stop.wait(self.interval_s):
                self.beat()

        self._thread = threading.Thread(target=loop, name=f"{self.owner}-heartbeat", daemon=True)
        self._thread.start()

    def join(self, timeout: float = 5.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout=timeout)
            self._thread = None
