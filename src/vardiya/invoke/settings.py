"""How a worker is tuned: one frozen, validated value instead of a dozen keyword arguments.

A ``WorkerSettings`` is checked when it is made, so a bad value (a lease of 0, a prefetch of -1) is an
``InvalidInput`` before any store is opened and nothing is written. Durations are ``timedelta``; a
plain number is read as seconds at this boundary (ARCHITECTURE.md, "Durations"), the way the CLI's
``--lease`` flag gives it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ..clock import to_timedelta
from ..errors import InvalidInput
from ..limits import check_name

__all__ = ["WorkerSettings", "positive_duration"]


def _whole(value: object, what: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidInput(f"{what} must be a whole number of at least {low}, got {value!r}")
    return value


def positive_duration(value: object, what: str) -> timedelta:
    """A duration of more than 0 given as a ``timedelta`` or seconds (``InvalidInput`` otherwise)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(f"{what} must be a finite number of seconds, got {value!r}")
    try:
        duration = to_timedelta(value, what)  # type: ignore[arg-type]
    except OverflowError:
        raise InvalidInput(f"{what} of {value!r} seconds is longer than any duration vardiya supports") from None
    if duration <= timedelta(0):
        raise InvalidInput(f"{what} must be more than 0 seconds, got {value!r}")
    return duration


@dataclass(frozen=True, kw_only=True)
class WorkerSettings:
    """Every tuning option of a ``Worker``; the defaults are what ``vardiya worker`` runs with."""

    #: Threads claiming and running work.
    concurrency: int = 1
    #: How long a claim holds an item between heartbeats (a third of it between beats).
    lease: timedelta = timedelta(seconds=30)
    #: Async calls or stream batches claimed at a time per thread.
    prefetch: int = 100
    #: The name the worker claims under (a lease's owner); ``None`` makes a unique one.
    owner: str | None = None
    #: The shortest wait of an idle worker between looks for work (SQLite's ``PRAGMA data_version``).
    poll_min: timedelta = timedelta(seconds=0.01)
    #: The longest wait of an idle worker before it looks again, whatever woke it or not.
    poll_max: timedelta = timedelta(seconds=0.25)
    #: Keep leases alive from a heartbeat thread; off only where nothing else could reclaim (one
    #: process, a virtual clock).
    heartbeat: bool = True
    #: Only these handlers, slot jobs, pipelines and periodic functions of the app (empty: all of them).
    names: tuple[str, ...] = field(default=())
    #: Only items of these named queues (``queue=`` on a handler; empty: every queue). Ticks, pipeline
    #: runs and periodic functions are in the queue "default".
    queues: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        _whole(self.concurrency, "concurrency", 1)
        _whole(self.prefetch, "prefetch", 1)
        object.__setattr__(self, "lease", positive_duration(self.lease, "a lease"))
        object.__setattr__(self, "poll_min", positive_duration(self.poll_min, "poll_min"))
        object.__setattr__(self, "poll_max", positive_duration(self.poll_max, "poll_max"))
        if self.poll_min > self.poll_max:
            raise InvalidInput(
                f"poll_min ({self.poll_min.total_seconds()} s) is longer than poll_max "
                f"({self.poll_max.total_seconds()} s); the shortest wait cannot exceed the longest"
            )
        if not isinstance(self.heartbeat, bool):
            raise InvalidInput(f"heartbeat must be True or False, got {self.heartbeat!r}")
        if self.owner is not None and (not isinstance(self.owner, str) or not self.owner.strip()):
            raise InvalidInput(f"a worker's owner must be a non-empty name, got {self.owner!r}")
        object.__setattr__(self, "names", _names(self.names))
        object.__setattr__(self, "queues", _queues(self.queues))

    @property
    def lease_s(self) -> float:
        """The lease in seconds, as the store's claim and heartbeat take it."""
        return self.lease.total_seconds()

    @property
    def poll_min_s(self) -> float:
        return self.poll_min.total_seconds()

    @property
    def poll_max_s(self) -> float:
        return self.poll_max.total_seconds()

    def to_json(self) -> dict[str, Any]:
        """The settings as JSON (durations in seconds, named ``_s``), as a log line or a report shows them."""
        return {
            "concurrency": self.concurrency,
            "lease_s": self.lease_s,
            "prefetch": self.prefetch,
            "owner": self.owner,
            "poll_min_s": self.poll_min_s,
            "poll_max_s": self.poll_max_s,
            "heartbeat": self.heartbeat,
            "names": list(self.names),
            "queues": list(self.queues),
        }

    @property
    def claimed_queues(self) -> list[str] | None:
        """The queues as the store's claim takes them (None: every queue)."""
        return list(self.queues) or None


def _queues(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        raise InvalidInput(f"queues must be a list of queue names, got the string {value!r}; write [{value!r}]")
    if not isinstance(value, Iterable):
        raise InvalidInput(f"queues must be a list of queue names, got {value!r}")
    return tuple(sorted({check_name(queue, "a queue name (--queue)") for queue in value}))


def _names(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, Iterable):
        raise InvalidInput(f"names must be a list of handler, job, pipeline or function names, got {value!r}")
    names = tuple(value)
    for name in names:
        if not isinstance(name, str) or not name:
            raise InvalidInput(f"names must be non-empty strings, got {name!r}")
    return names
