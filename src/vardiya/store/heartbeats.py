"""The services alive: schedulers and workers beat a row of ``services`` while they run (``store.heartbeats``).

A service writes its row when it starts, moves ``beat_at`` forward at its heartbeat interval (the
interval is kept in the row) and deletes it on a clean stop. A service killed with SIGKILL, or on a
machine that was lost, leaves its row behind with a beat that grows old: a reader calls it alive only
while its last beat is within ``ALIVE_INTERVALS`` intervals (one missed beat is a slow transaction, three
is a dead process), which is what ``vardiya status`` and the dashboard show.

``ServiceBeat`` is the writer a service holds: ``beat()`` is cheap to call on every loop of the service,
it writes only when an interval has passed on the store's clock (the monotonic one, so a wall-clock
step neither floods nor starves the table).
"""

from __future__ import annotations

import enum
import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from .schema import services

if TYPE_CHECKING:
    from .api import Store

__all__ = ["ALIVE_INTERVALS", "Heartbeats", "ServiceBeat", "ServiceKind", "ServiceRecord"]

log = logging.getLogger("vardiya.service")

#: A service is alive while its last beat is at most this many of its intervals old.
ALIVE_INTERVALS = 3
#: Rows of services dead for this long are deleted by the next service that starts (a SIGKILLed
#: service never deletes its own row; a week keeps them visible long enough to be noticed).
FORGET_AFTER = timedelta(days=7)


class ServiceKind(enum.Enum):
    """The two kinds of service that beat."""

    SCHEDULER = "scheduler"
    WORKER = "worker"


@dataclass(frozen=True, kw_only=True)
class ServiceRecord:
    """One service's row, and whether it is alive at ``now`` (the time of the read)."""

    id: str
    kind: ServiceKind
    host: str
    pid: int
    app: str | None
    started_at: datetime
    beat_at: datetime
    interval_s: float
    runs: tuple[str, ...]
    alive: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "kind": self.kind.value, "host": self.host, "pid": self.pid, "app": self.app,
            "started_at": self.started_at.isoformat(), "beat_at": self.beat_at.isoformat(),
            "interval_s": self.interval_s, "runs": list(self.runs), "alive": self.alive,
        }


def _record(row: Any, now: datetime) -> ServiceRecord:
    mapping = row._mapping
    interval = float(mapping["interval_s"])
    return ServiceRecord(
        id=mapping["id"], kind=ServiceKind(mapping["kind"]), host=mapping["host"], pid=int(mapping["pid"]),
        app=mapping["app"], started_at=mapping["started_at"], beat_at=mapping["beat_at"], interval_s=interval,
        runs=tuple(mapping["runs"] or ()),
        alive=now - mapping["beat_at"] <= timedelta(seconds=interval * ALIVE_INTERVALS),
    )


class Heartbeats:
    """The ``services`` table of one store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def beat(
        self,
        service_id: str,
        *,
        kind: ServiceKind,
        interval_s: float,
        app: str | None = None,
        runs: Sequence[str] = (),
        started_at: datetime | None = None,
        host: str | None = None,
        pid: int | None = None,
    ) -> None:
        """Write ``service_id``'s row at the store's time: created on the first beat, moved on after."""
        if interval_s <= 0:
            raise ValueError(f"a heartbeat interval must be more than 0 seconds, got {interval_s!r}")
        store = self._store
        now = store.clock.now()
        row = {
            "id": service_id, "kind": kind.value, "host": host or socket.gethostname(),
            "pid": os.getpid() if pid is None else pid, "app": app, "started_at": started_at or now,
            "beat_at": now, "interval_s": float(interval_s), "runs": list(runs),
        }
        insert = store.dialect_insert(services).values(row)
        with store.transaction() as connection:
            connection.execute(
                insert.on_conflict_do_update(
                    index_elements=["id"], set_={"beat_at": insert.excluded.beat_at, "runs": insert.excluded.runs}
                )
            )

    def remove(self, service_id: str) -> bool:
        """Delete ``service_id``'s row (a clean stop); False when it had none."""
        with self._store.transaction() as connection:
            return bool(connection.execute(sa.delete(services).where(services.c.id == service_id)).rowcount)

    def all(self, *, alive_only: bool = False) -> list[ServiceRecord]:
        """Every service with a row, alive or not (``alive_only``: the alive ones), by kind then start."""
        now = self._store.clock.now()
        query = sa.select(services).order_by(services.c.kind, services.c.started_at, services.c.id)
        with self._store.reading() as connection:
            records = [_record(row, now) for row in connection.execute(query)]
        return [record for record in records if record.alive] if alive_only else records

    def alive(self) -> list[ServiceRecord]:
        """The services whose last beat is within ``ALIVE_INTERVALS`` of their intervals."""
        return self.all(alive_only=True)

    def forget_dead(self, older_than: timedelta = FORGET_AFTER) -> int:
        """Delete the rows of services that have not beaten for ``older_than``; returns how many."""
        cut = self._store.clock.now() - older_than
        with self._store.transaction() as connection:
            return int(connection.execute(sa.delete(services).where(services.c.beat_at < cut)).rowcount)


class ServiceBeat:
    """A running service's heartbeat: ``start`` once, ``beat`` on every loop (it writes once an interval),
    ``stop`` on a clean exit. A failed write is logged and tried again an interval later: a service must not
    stop working because its heartbeat could not be written."""

    def __init__(
        self, store: Store, service_id: str, kind: ServiceKind, *, interval_s: float, app: str | None,
        runs: Sequence[str],
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"a heartbeat interval must be more than 0 seconds, got {interval_s!r}")
        self._store = store
        self.service_id = service_id
        self.kind = kind
        self.interval_s = float(interval_s)
        self.app = app
        self.runs = tuple(runs)
        self._started_at: datetime | None = None
        self._last: float | None = None

    def start(self) -> None:
        """The first beat (the row appears at once, not an interval later); old dead rows are dropped."""
        self._started_at = self._store.clock.now()
        self._write()
        try:
            self._store.heartbeats.forget_dead()
        except Exception:
            log.warning("could not delete the rows of long-dead services", exc_info=True)

    def beat(self) -> None:
        """Write a beat when an interval has passed since the last one written (else nothing)."""
        if self._last is not None and self._store.clock.monotonic() - self._last < self.interval_s:
            return
        self._write()

    def stop(self) -> None:
        """Delete the row: a clean stop is not a dead service."""
        try:
            self._store.heartbeats.remove(self.service_id)
        except Exception:
            log.warning("could not delete the heartbeat row of %s", self.service_id, exc_info=True)

    def _write(self) -> None:
        self._last = self._store.clock.monotonic()
        try:
            self._store.heartbeats.beat(
                self.service_id, kind=self.kind, interval_s=self.interval_s, app=self.app, runs=self.runs,
                started_at=self._started_at,
            )
        except Exception:
            log.warning("heartbeat of %s not written", self.service_id, exc_info=True)
