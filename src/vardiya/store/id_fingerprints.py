"""A fingerprint of a set of integer record ids, computed in SQL on either backend.

The SQL table source asks "is every id of this slot settled?" at each backlog check. Comparing how
many ids the slot has with how many settled ledger rows it has is not enough: when one id is deleted
and another added, the counts match and the new record would be skipped. Reading both sets costs a
probe per id. The fingerprint is the middle way: both sides aggregate their ids in SQL into

    (rows, integer ids, sum(x mod p), sum(x^2 mod p), sum(x mod q))    p = 2^31 - 1, q = 10^9 + 7

and the slot is taken as settled only when the two fingerprints are equal. Equal sets always give
equal fingerprints. Different sets of the same size must differ by ids whose sums agree modulo p and
q and whose squares agree modulo p: one id replaced by another changes the first sum unless they are
a multiple of p * q apart; several replacements agree on all three only by a coincidence of about one
in 10^18. When they differ, the source runs its exact anti-join. Every term stays below 2^62 and each
sum below 2^63 for slots of up to 2^31 ids, so no backend overflows.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

__all__ = ["Fingerprint", "fingerprint_columns", "fingerprint_of"]

_P = 2_147_483_647
_Q = 1_000_000_007

#: (rows, integer ids, sum of x mod p, sum of x^2 mod p, sum of x mod q); sums of no rows are 0.
Fingerprint = tuple[int, int, int, int, int]


def fingerprint_columns(value: sa.ColumnElement[Any]) -> list[sa.ColumnElement[Any]]:
    """The aggregate columns of the fingerprint of ``value`` (an integer, NULL for a row without one)."""
    modp = value % _P
    return [
        sa.func.count(),
        sa.func.count(value),
        sa.func.coalesce(sa.func.sum(modp), 0),
        sa.func.coalesce(sa.func.sum((modp * modp) % _P), 0),
        sa.func.coalesce(sa.func.sum(value % _Q), 0),
    ]


def fingerprint_of(row: Any) -> Fingerprint:
    """The fingerprint from the row of ``fingerprint_columns`` (PostgreSQL sums come back as Decimal)."""
    rows, ids, first, squares, second = row
    return (int(rows), int(ids), int(first), int(squares), int(second))
