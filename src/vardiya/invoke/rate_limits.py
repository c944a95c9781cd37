"""What a worker's claims carry for named queues and rate limits (``Worker`` passes both to every claim)."""

from __future__ import annotations

from collections.abc import Iterable

from ..store.rate_buckets import ClaimLimit
from .handlers import Handler

__all__ = ["claim_limits"]


def claim_limits(handlers: Iterable[Handler]) -> dict[str, ClaimLimit]:
    """Per work-item kind, the token bucket of its handler's ``rate_limit`` (its calls and its stream
    batches share the handler's bucket, named by the handler)."""
    limits: dict[str, ClaimLimit] = {}
    for handler in handlers:
        limit = handler.limit
        if limit is not None:
            bucket = ClaimLimit(bucket=handler.name, limit=limit)
            limits[handler.call_kind] = bucket
            limits[handler.batch_kind] = bucket
    return limits
