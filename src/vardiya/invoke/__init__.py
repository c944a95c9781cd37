"""Invocation models: the pure rules first (retry decisions, batch sizing and splitting).

``retry`` decides when a failed attempt is retried and when an item is dead-lettered; ``batching``
checks a stream batch size against the time limit and splits failing batches. Neither reads a clock,
a store or a file.
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

__all__ = [
    "Backoff",
    "BisectPlan",
    "CallerRetry",
    "ExponentialWait",
    "FixedWait",
    "JITTER_VERSION",
    "Jitter",
    "RetryDecision",
    "RetryPolicy",
    "Wait",
    "bisect",
    "check_batch_size",
    "jitter_fraction",
    "largest_batch_that_fits",
    "partial_failures",
    "plan_bisect",
    "worst_case_duration",
]
