"""Invocation models: the same handler run sync, async or as a batched stream.

The pure rules (``retry``: when a failed attempt is retried or dead-lettered; ``batching``: what fits
the time limit and how failing batches split) read no clock, store or file. ``execute`` is the one
implementation of an attempt (handler calls, failure policy, dedup, time limit) that the worker, sync
calls and the planner share. ``invoker`` is the caller's side; the worker's collaborators are here (``claims``,
``heartbeat``, ``running``, ``cutter``, ``idle``, ``settings``) and the ``Worker`` that coordinates them
is in ``vardiya.service.worker``; ``dlq`` is the dead-letter store, ``metrics`` the figures of a run.
"""

from __future__ import annotations

from .batching import (
    BisectPlan,
    bisect,
    check_batch_size,
    largest_batch_that_fits,
    partial_failures,
    plan_bisect,
    worst_case_duration,
)
from .execute import AttemptOutcome, BatchRecord, CallContext, CallRecord, run_attempt
from .handlers import Dedup, FailurePolicy, Handler, Model, payload_key
from .invoker import CallStatus, Handle, Invoker
from .metrics import Metrics, Prices, store_metrics
from .report import WorkerReport
from .retry import (
    JITTER_VERSION,
    Backoff,
    CallerRetry,
    ExponentialWait,
    FixedWait,
    Jitter,
    RetryDecision,
    RetryPolicy,
    Wait,
    jitter_fraction,
)
from .settings import WorkerSettings

__all__ = [
    "AttemptOutcome",
    "Backoff",
    "BatchRecord",
    "BisectPlan",
    "CallContext",
    "CallRecord",
    "CallStatus",
    "CallerRetry",
    "Dedup",
    "ExponentialWait",
    "FailurePolicy",
    "FixedWait",
    "Handle",
    "Handler",
    "Invoker",
    "JITTER_VERSION",
    "Jitter",
    "Metrics",
    "Model",
    "Prices",
    "RetryDecision",
    "RetryPolicy",
    "Wait",
    "WorkerReport",
    "WorkerSettings",
    "bisect",
    "check_batch_size",
    "jitter_fraction",
    "largest_batch_that_fits",
    "partial_failures",
    "payload_key",
    "plan_bisect",
    "run_attempt",
    "store_metrics",
    "worst_case_duration",
]
