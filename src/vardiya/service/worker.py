"""The worker: claims async calls, stream batches, ticks and pipeline runs, runs them, records every outcome.

A worker is ``concurrency`` threads, each claiming up to ``prefetch`` items at a time with a lease, and
one heartbeat thread that keeps those leases alive. What it guarantees:

- A worker killed with SIGKILL loses nothing: its heartbeats stop, its leases run out, another worker
  reclaims the items, and the crash counts as an attempt of the items whose handler had started (an
  item that crashes every worker ends dead). Items it had only prefetched go back uncharged.
- ``stop()`` (SIGTERM in ``vardiya worker``) drains: no new claims, the item in hand is finished, the
  claimed items not yet started are released unattempted, and ``run`` returns.
- Retries belong to the engine, and a dead letter is always logged (``vardiya.worker``).
- Idle, it waits for work: on PostgreSQL a ``LISTEN`` wakes it the moment something is enqueued or
  appended; on SQLite it reads ``PRAGMA data_version`` every ``poll_min`` and wakes at the first commit
  of another connection (at the latest after ``poll_max``).

The worker is a coordinator of collaborators, one concern each:

- ``invoke.claims.ClaimLoop``: what each thread claims, in which order, and when it waits;
- ``invoke.heartbeat.LeaseHeartbeat``: the leases of the items in hand;
- ``invoke.running.HandlerRunner``: async calls and stream batches, run and recorded;
- ``invoke.cutter.StreamCutter``: waiting stream records cut into batches;
- ``service.serving.ServiceItemRunner``: ticks, pipeline runs and periodic functions (``service.work``);
- ``invoke.idle.IdleWait``: the idle wait, through ``Clock.wait``.

It lives in the service layer because it runs ticks and pipelines as well as invocation work: the
engine's claim loop is handed the served items (``ServedItems``), so ``invoke`` never imports ``service``.
"""

from __future__ import annotations

import threading
import uuid
from typing import TYPE_CHECKING, Any

from ..clock import Clock
from ..errors import InvalidInput
from ..invoke.claims import ClaimLoop
from ..invoke.cutter import StreamCutter
from ..invoke.handlers import Handler, Model
from ..invoke.heartbeat import LeaseHeartbeat
from ..invoke.idle import IdleWait
from ..invoke.invoker import handlers_of
from ..invoke.report import WorkerReport
from ..invoke.running import HandlerRunner
from ..invoke.settings import WorkerSettings
from ..invoke.wake import waker_for
from ..schedule.periodic import periodic_kind
from ..schedule.plan import pipeline_kind, tick_kind
from ..store.heartbeats import ServiceBeat, ServiceKind
from .paused_kinds import PausedKinds
from .serving import ServiceItemRunner
from .work import ServiceWork

if TYPE_CHECKING:
    from ..store.api import Store
    from .metrics import ServiceMetrics

__all__ = ["Worker", "WorkerReport", "WorkerSettings"]


class Worker:
    """Runs an app's ticks, pipeline runs, periodic functions, async calls and stream batches from one store.

    ``app`` is an ``App``, or (for invocation work only) a mapping or an iterable of handlers.
    """

    def __init__(
        self,
        store: Store,
        app: Any,
        settings: WorkerSettings | None = None,
        *,
        clock: Clock | None = None,
        metrics: ServiceMetrics | None = None,
    ) -> None:
        self.settings = settings if settings is not None else WorkerSettings()
        if not isinstance(self.settings, WorkerSettings):
            raise InvalidInput(f"a worker's settings must be a WorkerSettings, got {self.settings!r}")
        self.store = store
        self.clock: Clock = clock if clock is not None else store.clock
        self.handlers = self.check(app, self.settings)
        self.metrics = metrics
        self.owner = self.settings.owner or f"worker-{uuid.uuid4().hex[:12]}"
        self._stop = threading.Event()
        self._report = WorkerReport()
        #: this worker's row in the services table (``vardiya status``), beaten with the leases
        self.service_beat = ServiceBeat(
            store, self.owner, ServiceKind.WORKER, interval_s=max(0.05, self.settings.lease_s / 3),
            app=getattr(app, "name", None), runs=[],
        )
        self.heartbeat = LeaseHeartbeat(
            store, owner=self.owner, lease_s=self.settings.lease_s, enabled=self.settings.heartbeat,
            also=self.service_beat.beat,
        )
        by_kind: dict[str, Handler] = {}
        for handler in self.handlers.values():
            by_kind[handler.call_kind] = handler.with_model(Model.ASYNC)
            by_kind[handler.batch_kind] = handler.with_model(Model.STREAM)
        self.services = _service_work(store, app, self.settings.names, metrics)
        runner = HandlerRunner(
            store, by_kind, owner=self.owner, clock=self.clock, report=self._report, heartbeat=self.heartbeat,
            stop=self._stop,
        )
        served = None if self.services is None else ServiceItemRunner(
            store, self.services, owner=self.owner, report=self._report, heartbeat=self.heartbeat, metrics=metrics
        )
        streams = [handler for handler in self.handlers.values() if handler.model is Model.STREAM]
        self.loop = ClaimLoop(
            store, self.settings, owner=self.owner, runner=runner, cutter=StreamCutter(store, streams, self._report),
            served=served, stop=self._stop, idle=self._idle, pauses=PausedKinds(store),
        )
        self.service_beat.runs = tuple(self.loop.all_kinds)

    @staticmethod
    def check(app: Any, settings: WorkerSettings) -> dict[str, Handler]:
        """The handlers the worker runs; ``InvalidInput`` for a name ``settings.names`` gives that the app
        does not have. Callable before a store is opened (``vardiya worker`` writes nothing then)."""
        handlers = handlers_of(app)
        if not settings.names:
            return handlers
        known = {
            *handlers,
            *getattr(app, "slot_jobs", ()), *getattr(app, "pipelines", ()), *getattr(app, "periodic", ()),
        }
        for name in settings.names:
            if name not in known:
                raise InvalidInput(
                    f"{name!r} is not a handler, slot job, pipeline or periodic function of the app; "
                    f"it has: {', '.join(sorted(known)) or 'none'}"
                )
        return {name: handler for name, handler in handlers.items() if name in settings.names}

    def _idle(self) -> IdleWait:
        settings = self.settings
        waker = waker_for(self.store, settings.poll_min_s, settings.poll_max_s)
        return IdleWait(self.clock, waker, self._stop, poll_min_s=settings.poll_min_s, poll_max_s=settings.poll_max_s)

    # -- control ------------------------------------------------------------------------------------

    @property
    def kinds(self) -> list[str]:
        """Every item kind this worker claims."""
        return self.loop.all_kinds

    def stop(self) -> None:
        """Drain: finish the item in hand, release the rest, claim nothing more."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def report(self) -> WorkerReport:
        """What this worker has done so far (live while it runs; a progress display reads it)."""
        return self._report

    def run(self, *, until_idle: bool = False) -> WorkerReport:
        """Work until ``stop()`` (or, with ``until_idle``, until no work of the worker is left)."""
        self.service_beat.start()
        self.heartbeat.start(self._stop)
        try:
            concurrency = self.settings.concurrency
            if concurrency == 1:
                self.loop.run(until_idle)
            else:
                threads = [
                    threading.Thread(target=self.loop.run, args=(until_idle,), name=f"{self.owner}-{n}", daemon=True)
                    for n in range(concurrency)
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
        finally:
            self._stop.set()
            self.heartbeat.join()
            self.service_beat.stop()
        return self._report


def _service_work(store: Store, app: Any, names: tuple[str, ...], metrics: ServiceMetrics | None) -> ServiceWork | None:
    """The ticks, pipeline runs and periodic functions of ``app`` (those ``names`` picks), or None."""
    if not any(getattr(app, name, None) for name in ("slot_jobs", "pipelines", "periodic")):
        return None
    work = ServiceWork(store, app, metrics=metrics)
    if names:
        chosen = {kind(name) for name in names for kind in (tick_kind, pipeline_kind, periodic_kind)}
        work.kinds = [kind for kind in work.kinds if kind in chosen]
    return work if work else None
