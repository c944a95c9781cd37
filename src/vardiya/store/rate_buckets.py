"""A rate-limited claim: token buckets in ``rate_buckets``, refilled and taken in the claim's transaction.

A worker claims for many kinds at once; some of them belong to rate-limited handlers. ``limited_claim``
runs inside the claim's transaction (SQLite's ``BEGIN IMMEDIATE``, so no other writer comes between the
bucket's read and its write; on PostgreSQL the bucket rows are locked ``FOR UPDATE`` in name order, so
two workers' claims of one handler take turns and never deadlock), and:

1. claims up to ``n`` items of the kinds without a limit, as any claim does;
2. for each bucket (a handler's name), refills it from the clock (``rules.rates.refill``) and claims at
   most as many of its kinds' items as it holds whole tokens, and no more than ``n`` in all;
3. takes one token per item claimed and writes the bucket back.

Items over the limit are not touched: they stay ready (not failed, not charged) for a later claim.
Statements are driver SQL (``hot.py``'s reasons: they run on the claim's cursor, every claim).

``RateBuckets`` (``store.rate_buckets``) reads the buckets outside a claim: when the next token of a
bucket is due, which a worker that has only rate-limited work left waits for instead of polling.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..rules.rates import RateLimit, refill, token_due_in
from .schema import rate_buckets
from .url import Backend

if TYPE_CHECKING:
    from .api import Store

__all__ = ["ClaimLimit", "NextToken", "RateBuckets", "limited_claim"]

#: ``claim(n, kinds) -> rows`` of the backend's ordinary claim, on the transaction's cursor.
ClaimRows = Callable[[int, Sequence[str]], list[Any]]
#: ``execute(statement, parameters) -> rows`` on the transaction's cursor.
Execute = Callable[[str, tuple[Any, ...]], list[Any]]


@dataclass(frozen=True, kw_only=True)
class ClaimLimit:
    """The bucket a kind's items take their tokens from, and its rate."""

    bucket: str
    """The bucket's name: the handler's, so its calls and its stream batches share one limit."""
    limit: RateLimit


_STATEMENTS = {
    Backend.SQLITE: (
        "INSERT INTO rate_buckets (name, tokens, refilled_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING",
        "SELECT tokens, refilled_at FROM rate_buckets WHERE name = ?",
        "UPDATE rate_buckets SET tokens = ?, refilled_at = ? WHERE name = ?",
    ),
    Backend.POSTGRESQL: (
        "INSERT INTO rate_buckets (name, tokens, refilled_at) VALUES (%s, %s, %s) ON CONFLICT (name) DO NOTHING",
        "SELECT tokens, refilled_at FROM rate_buckets WHERE name = %s FOR UPDATE",
        "UPDATE rate_buckets SET tokens = %s, refilled_at = %s WHERE name = %s",
    ),
}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _seconds(moment: Any) -> float:
    """A bucket's ``refilled_at`` as read (SQLite: integer microseconds; PostgreSQL: a datetime), in seconds."""
    if isinstance(moment, datetime):
        return (moment - _EPOCH).total_seconds()
    return int(moment) / 1_000_000


def limited_claim(
    backend: Backend,
    execute: Execute,
    claim: ClaimRows,
    n: int,
    kinds: Sequence[str],
    limits: Mapping[str, ClaimLimit],
    now: datetime,
    item_time: Callable[[datetime], Any],
) -> list[Any]:
    """Claim rows of ``kinds`` within the limits (module doc); ``item_time`` converts ``now`` for the driver."""
    free = [kind for kind in kinds if kind not in limits]
    buckets: dict[str, tuple[RateLimit, list[str]]] = {}
    for kind in kinds:
        if kind in limits:
            bucket = limits[kind]
            buckets.setdefault(bucket.bucket, (bucket.limit, []))[1].append(kind)
    rows: list[Any] = claim(n, free) if free else []
    insert, select, update = _STATEMENTS[backend]
    t_now = item_time(now)
    now_s = (now - _EPOCH).total_seconds()
    for name in sorted(buckets):  # name order: the row locks of two claims never cross
        limit, bucket_kinds = buckets[name]
        execute(insert, (name, float(limit.capacity), t_now))
        tokens, refilled_at = execute(select, (name,))[0]
        refilled_s = _seconds(refilled_at)
        tokens = refill(float(tokens), now_s - refilled_s, limit.per_second, limit.capacity)
        allowed = min(math.floor(tokens + 1e-9), n - len(rows))
        taken = claim(allowed, bucket_kinds) if allowed > 0 else []
        rows.extend(taken)
        # ``now`` was read before this claim waited for the bucket: a claim that took the lock first may
        # have refilled it up to a later time. Never move the refill time back, or that span would be
        # refilled twice.
        execute(update, (max(0.0, tokens - len(taken)), t_now if now_s >= refilled_s else refilled_at, name))
    return rows


@dataclass(frozen=True, kw_only=True, slots=True)
class NextToken:
    """When the bucket ``bucket`` next holds a whole token (``at`` may be now: it holds one already)."""

    bucket: str
    at: datetime


class RateBuckets:
    """Reads of the token buckets, outside any claim (they take no write lock)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def next_token(self, limits: Mapping[str, RateLimit]) -> NextToken | None:
        """The earliest next token among the buckets named in ``limits`` (None: no bucket named).

        A bucket with no row yet has never been claimed from: it is full, its token is due now. The
        time is rounded up to the microsecond the store keeps, so a claim made then finds the token.
        """
        if not limits:
            return None
        now = self._store.clock.now()
        c = rate_buckets.c
        with self._store.reading() as connection:
            rows = {
                row.name: (row.tokens, row.refilled_at)
                for row in connection.execute(sa.select(c.name, c.tokens, c.refilled_at).where(c.name.in_(sorted(limits))))
            }
        best: NextToken | None = None
        for name in sorted(limits):
            limit = limits[name]
            tokens, refilled_at = rows.get(name, (float(limit.capacity), now))
            held = refill(float(tokens), (now - refilled_at).total_seconds(), limit.per_second, limit.capacity)
            due_in = token_due_in(held, limit.per_second)
            at = now + timedelta(microseconds=math.ceil(due_in * 1_000_000))
            if best is None or at < best.at:
                best = NextToken(bucket=name, at=at)
        return best
