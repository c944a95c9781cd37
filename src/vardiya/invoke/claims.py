"""A worker thread's claim loop: what it claims, in which order, and when it waits instead.

Each turn of the loop, in order:

1. one served item (a tick, a pipeline run, a periodic function's call; ``ServedItems``), claimed one
   at a time: each is long next to a call, and holding a hundred would starve the rest of the fleet;
2. the stream cut (waiting records become batch items);
3. up to ``prefetch`` invocation items (async calls, stream batches), run by the ``HandlerRunner``;
4. nothing claimed: a flushing cut with ``until_idle``, then the idle wait (``IdleWait``), or the end
   of the loop when ``until_idle`` finds no work of ours left at all. What the wait is for
   (``awaited``) is the next due item, or, when the only ready items are a rate-limited handler's and
   its bucket is empty, the bucket's next token (``store.rate_buckets``): the worker wakes when a
   claim can take it, not at its next poll. It is logged once (``IdleLog``).

Every claim of the worker is one of the two methods ``claim_served`` and ``claim_invocations``: a
filter on what a worker claims goes there.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from ..rules.rates import RateLimit
from ..store.records import WorkItem
from .cutter import StreamCutter
from .idle import Awaited, IdleLog, IdleWait
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
        #: the worker's idle and resume lines, shared by its threads
        self.idle_log = IdleLog(owner, settings.concurrency)

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
                    self.idle_log.resumed()
                    assert self.served is not None
                    self.served.serve(served)
                    continue
                if self.cutter:
                    self.cutter.cut(flush=False)
                items = self.claim_invocations(pacer)
                if items:
                    idle.worked()
                    self.idle_log.resumed()
                    self.runner.run(items, pacer)
                    continue
                if self.cutter and self.cutter.cut(flush=until_idle):
                    continue
                awaited = self.awaited(streams=until_idle)
                if until_idle:
                    if awaited.at is None:
                        return
                    self.idle_log.waiting(awaited)
                    idle.until(awaited.at)
                    continue
                self.idle_log.waiting(awaited)
                if self.served is not None or awaited.token:
                    # The scheduler enqueues ticks a moment before they are due, and an empty bucket
                    # refills at its rate: wake when the next is due.
                    idle.for_work(awaited.at)
                else:
                    idle.for_work()
        finally:
            idle.close()

    def next_due(self) -> datetime | None:
        """When the next item of ours can be claimed (None: nothing left at all), stream records too."""
        return self.awaited(streams=True).at

    def awaited(self, *, streams: bool) -> Awaited:
        """What this worker waits for when it claimed nothing: the next due item (its time and kind),
        a rate-limited handler's next token when its ready items wait for one, or new work.

        ``streams``: records still waiting in a stream after a flushing cut count as due now (they
        are held back by their lane's batch in flight, and become due when it does).
        """
        kinds = self.pauses.active(self.all_kinds)
        queues = self.settings.claimed_queues
        now = self.runner.clock.now()
        empty = self.empty_buckets(kinds, now)
        if empty:
            kinds = [kind for kind in kinds if kind not in self.limits or self.limits[kind].bucket not in empty]
        due = self.store.items.next_due_item(kinds, queues)
        token = self.store.rate_buckets.next_token(empty)
        if token is not None and (due is None or token.at < due.at):
            limit = empty[token.bucket]
            return Awaited(
                at=token.at, what=f"the next token of handler {token.bucket!r} (rate limit {limit.spelling()})",
                token=True,
            )
        if due is not None:
            what = f"the lease of a {due.kind} item to end" if due.lease_end else due.kind
            return Awaited(at=due.at, what=what)
        if streams and self.cutter.any_waiting():
            return Awaited(at=now, what="stream records waiting to be cut")
        return Awaited(at=None)

    def empty_buckets(self, kinds: Sequence[str], now: datetime) -> dict[str, RateLimit]:
        """The rate limits (by bucket) of ``kinds`` whose items are due now yet were not claimed: their
        bucket holds no whole token."""
        buckets: dict[str, tuple[RateLimit, list[str]]] = {}
        for kind in kinds:
            claim_limit = self.limits.get(kind)
            if claim_limit is not None:
                buckets.setdefault(claim_limit.bucket, (claim_limit.limit, []))[1].append(kind)
        empty: dict[str, RateLimit] = {}
        for bucket, (limit, bucket_kinds) in buckets.items():
            due = self.store.items.next_due(bucket_kinds, self.settings.claimed_queues)
            if due is not None and due <= now:
                empty[bucket] = limit
        return empty


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
