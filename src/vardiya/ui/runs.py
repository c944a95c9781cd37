"""Pipeline runs the dashboard starts (rerun, resume), each in a thread the server owns.

A run can take minutes, longer than a browser or a proxy waits for an answer, so the POST that starts
it only starts it: a page redirects to the run's status page, which htmx polls until the run is done
or failed; the API answers 202 with the run and its ``/api/runs/ID``, which a client polls. One run at a time per pipeline: a second request while one runs is refused (``RunBusy``, 409),
since two runs of one pipeline would race for the same tasks. The server keeps the last
``KEPT_RUNS`` runs it started, so a status page outlives its run for a while; a restart forgets them
(the store keeps every run's outcome: the pipeline's grid shows it).
"""

from __future__ import annotations

import enum
import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import VardiyaError

__all__ = ["KEPT_RUNS", "BackgroundRun", "BackgroundRuns", "RunBusy", "RunPhase"]

#: How many finished runs the server remembers for their status pages.
KEPT_RUNS = 100


class RunBusy(VardiyaError):
    """A run of this pipeline that the dashboard started is still running."""


class RunPhase(enum.Enum):
    """Where a background run is."""

    RUNNING = "running"
    #: it ended and returned a result (some tasks may have failed: the result says so)
    DONE = "done"
    #: it raised: the error is its message
    FAILED = "failed"


@dataclass(frozen=True, kw_only=True)
class BackgroundRun:
    """One run the dashboard started: what it is, where it is, and how it ended."""

    id: int
    pipeline: str
    #: ``rerun`` or ``resume``
    action: str
    #: the task a rerun reruns (None for a resume)
    task: str | None
    phase: RunPhase = RunPhase.RUNNING
    #: the run's ``--json`` document once it is done
    result: dict[str, Any] | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The run as the status page's JSON."""
        return {
            "id": self.id, "pipeline": self.pipeline, "action": self.action, "task": self.task,
            "phase": self.phase.value, "result": self.result, "error": self.error,
        }


@dataclass(kw_only=True)
class BackgroundRuns:
    """The runs one server started, and the lock that keeps them one per pipeline."""

    kept: int = KEPT_RUNS
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _runs: OrderedDict[int, BackgroundRun] = field(default_factory=OrderedDict)
    _threads: dict[int, threading.Thread] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def start(self, pipeline: str, action: str, task: str | None, work: Callable[[], dict[str, Any]]) -> BackgroundRun:
        """Start ``work`` (the run, returning its ``--json`` document) in a thread; ``RunBusy`` if a run of
        ``pipeline`` is still running."""
        with self._lock:
            run = self._claim(pipeline, action, task)
            thread = threading.Thread(target=self._run, args=(run.id, work), name=f"vardiya-ui-{action}-{run.id}", daemon=True)
            self._threads[run.id] = thread
        thread.start()
        return run

    def _claim(self, pipeline: str, action: str, task: str | None) -> BackgroundRun:
        """A new run of ``pipeline``, or ``RunBusy``; called with the lock held."""
        for each in self._runs.values():
            if each.pipeline == pipeline and each.phase is RunPhase.RUNNING:
                what = f"{each.action} of {each.task}" if each.task else each.action
                raise RunBusy(
                    f"pipeline {pipeline!r} is already running ({what}, run {each.id} of this dashboard); "
                    "wait for it to end, then try again"
                )
        run = BackgroundRun(id=next(self._ids), pipeline=pipeline, action=action, task=task)
        self._runs[run.id] = run
        while len(self._runs) > self.kept:
            oldest = next(iter(self._runs))
            if self._runs[oldest].phase is RunPhase.RUNNING:
                break
            del self._runs[oldest]
        return run

    def _run(self, run_id: int, work: Callable[[], dict[str, Any]]) -> None:
        try:
            result = work()
        except Exception as error:  # noqa: BLE001 - any failure of the run is shown on its page
            self._end(run_id, phase=RunPhase.FAILED, error=" ".join(str(error).split()) or type(error).__name__)
        else:
            self._end(run_id, phase=RunPhase.DONE, result=result)

    def _end(self, run_id: int, **changes: Any) -> None:
        with self._lock:
            if run_id in self._runs:
                self._runs[run_id] = replace(self._runs[run_id], **changes)
            self._threads.pop(run_id, None)

    def get(self, run_id: int) -> BackgroundRun | None:
        """The run, or None if this server did not start it (or has forgotten it)."""
        with self._lock:
            return self._runs.get(run_id)

    def wait(self, timeout_s: float | None = None) -> None:
        """Wait for every running run to end (the server's shutdown, and tests)."""
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(timeout_s)
