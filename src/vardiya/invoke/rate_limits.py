"""What a worker's claims carry for named queues and rate limits (``Worker`` passes both to every claim)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..errors import InvalidInput
from ..limits import check_name
from ..store.rate_buckets import ClaimLimit
from .handlers import Handler

__all__ = ["check_queues", "claim_limits"]


def check_queues(queues: Sequence[str] | None) -> list[str] | None:
    """The named queues a worker claims from, checked and sorted (None or empty: every queue)."""
    if queues is None:
        return None
    if isinstance(queues, str):
        raise InvalidInput(f"queues must be a list of queue names, got the string {queues!r}; write [{queues!r}]")
    names = sorted({check_name(queue, "a queue name (--queue)") for queue in queues})
    return names or None


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
