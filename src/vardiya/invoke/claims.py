"""A worker thread's claim loop: what it claims, in which order, and when it waits instead.

Each turn of the loop, in order:

1. one served item (a tick, a pipeline run, a periodic function's call; ``ServedItems``), claimed one
   at a time: each is long next to a call, and holding a hundred would starve the rest of the fleet;
2. the stream cut (waiting records become batch items);
3. up to ``prefetch`` invocation items (async calls, stream batches), run by the ``HandlerRunner``;
4. nothing claimed: a flushing cut with ``until_idle``, then the idle wait (``IdleWait``), or the end
   of the loop when ``until_idle`` finds no work of ours left at all.

Every claim of the worker is one of the two methods ``claim_served`` and ``claim_invocations``: a
filter on what a worker claims goes there.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from ..store.records import WorkItem
from .cutter import StreamCutter
from .idle import IdleWait
from .pacing import StartPacer
from .rate_limits import claim_limits
from .running import HandlerRunner
from .settings import WorkerSettings

if TYPE_CHECKING:
    from ..store.api import Store

__all__ = ["ClaimLoop", "Pauses", "ServedItems"]


class ServedItems(Protocol):
    """Work items a worker runs one at a time beside invocation work (the service layer's ticks,
    pipeline runs and periodic functions); injected, so the engine never imports the services."""

    @property
    def kinds(self) -> Sequence[str]:
        """The item kinds served (claimed before invocation work)."""
        ...

    def serve(self, item: WorkItem) -> None:
        """Run one claimed item and record how it ended."""
        ...


class ClaimLoop:
    """The loop of one worker thread; one instance is shared by the worker's threads."""

    def __init__(
        self,
        store: Store,
        settings: WorkerSettings,
        *,
        owner: str,
        runner: HandlerRunner,
        cutter: StreamCutter,
        served: ServedItems | None,
        stop: threading.Event,
        idle: IdleFactory,
        pauses: Pauses | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.owner = owner
        self.runner = runner
        self.cutter = cutter
        self.served = served if served is not None and served.kinds else None
        self.stop = stop
        self.idle = idle
        #: what is paused stays queued (``vardiya pause``): every claim leaves those kinds out
        self.pauses: Pauses = pauses if pauses is not None else _NothingPaused()
        #: the invocation item kinds of the worker's handlers
        self.kinds = sorted(runner.by_kind)
        self.all_kinds = sorted([*self.kinds, *(self.served.kinds if self.served else ())])
        #: per kind, the shared token bucket of its handler's ``rate_limit`` (taken in the claim)
        self.limits = claim_limits(runner.by_kind.values())

    # -- the claims ---------------------------------------------------------------------------------

    def claim_served(self) -> WorkItem | None:
        """One tick, pipeline or periodic item due now, claimed with a lease (None: none is due)."""
        if self.served is None:
            return None
        claimed = self.store.items.claim(
            1, owner=self.owner, lease=self.settings.lease_s, kinds=list(self.served.kinds),
            exclude=self.pauses.kinds(), queues=self.settings.claimed_queues,
        )
        return claimed[0] if claimed else None

    def claim_invocations(self, pacer: StartPacer) -> list[WorkItem]:
        """Up to ``prefetch`` async calls and stream batches due now; the first ``pacer.size`` are
        marked started by the claim itself."""
        if not self.kinds:
            return []
        return self.store.items.claim(
            self.settings.prefetch, owner=self.owner, lease=self.settings.lease_s, kinds=self.kinds, start=pacer.size,
            exclude=self.pauses.kinds(), queues=self.settings.claimed_queues, limits=self.limits,
        )

    # -- the loop -----------------------------------------------------------------------------------

    def run(self, until_idle: bool) -> None:
        """Claim and run until ``stop`` is set (or, with ``until_idle``, until none of our work is left)."""
        idle = self.idle()
        pacer = StartPacer()  # per thread: its chunks follow the handlers it runs
        try:
            while not self.stop.is_set():
                served = self.claim_served()
                if served is not None:
                    idle.worked()
                    assert self.served is not None
                    self.served.serve(served)
                    continue
                if self.cutter:
                    self.cutter.cut(flush=False)
                items = self.claim_invocations(pacer)
                if items:
                    idle.worked()
                    self.runner.run(items, pacer)
                    continue
                if self.cutter and self.cutter.cut(flush=until_idle):
                    continue
                if until_idle:
                    next_at = self.next_due()
                    if next_at is None:
                        return
                    idle.until(next_at)
                elif self.served is not None:
                    # The scheduler enqueues ticks a moment before they are due: wake when the next is.
                    idle.for_work(self.store.items.next_ready_at(self.pauses.active(self.served.kinds)))
                else:
                    idle.for_work()
        finally:
            idle.close()

    def next_due(self) -> datetime | None:
        """When the next item of ours can be claimed (None: nothing left at all), stream records too."""
        due = self.store.items.next_due(self.pauses.active(self.all_kinds), self.settings.claimed_queues)
        if due is not None:
            # Records still waiting in the stream after a flushing cut are held back by their lane's
            # batch in flight: they become due when that batch does, not before.
            return due
        return self.runner.clock.now() if self.cutter.any_waiting() else None


class Pauses(Protocol):
    """The kinds held back by a pause (the service layer's ``PausedKinds`` reads them from the store)."""

    def kinds(self) -> frozenset[str]: ...

    def active(self, kinds: Sequence[str]) -> list[str]: ...


class _NothingPaused:
    def kinds(self) -> frozenset[str]:
        return frozenset()

    def active(self, kinds: Sequence[str]) -> list[str]:
        return list(kinds)


class IdleFactory(Protocol):
    """Makes one thread's ``IdleWait`` (each thread has its own waker connection)."""

    def __call__(self) -> IdleWait: ...
