"""What a worker did: counts its collaborators add to from every thread."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields

__all__ = ["WorkerReport"]


@dataclass
class WorkerReport:
    """What a worker did in one ``run`` (live while it runs; a progress display reads it)."""

    items: int = 0
    succeeded: int = 0
    retried: int = 0
    dead: int = 0
    released: int = 0
    lost: int = 0
    calls: int = 0
    records: int = 0
    batches_cut: int = 0
    ticks: int = 0
    pipeline_runs: int = 0
    periodic_runs: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        """Add to counts from any thread (one lock, so concurrent threads never lose an increment)."""
        with self._lock:
            for name, count in counts.items():
                setattr(self, name, getattr(self, name) + count)

    def to_json(self) -> dict[str, int]:
        return {spec.name: getattr(self, spec.name) for spec in fields(self) if not spec.name.startswith("_")}
