"""The ledger's change tokens: has one slot of a period changed since a reader last read it?

Every transaction that writes ledger rows sets, in the same transaction, the token of each (job,
period, slot) it wrote to a fresh random 62-bit value (slot ``UNSLOTTED`` for rows marked without a
slot); a reset sets every token of its period. A reader that reads a slot's ``Marker`` *before* it
reads the slot's rows, and later finds the same marker, knows the rows have not changed in between:
a changed slot always has a new token, and a token read before a concurrent write can only make the
reader look again (never keep an answer the write made stale).

Why random tokens rather than a counter: the tokens come from ``os.urandom``, so forked workers and a
store recreated under the same URL (its tables truncated, as the test suite does) cannot hand out a
token a reader still holds. Two different states share a marker with probability 2**-62 per check.

Why per slot: a tick writes its own slot and reads its backlog's; with a marker per period, every
tick's marks would make the whole period's backlog look changed. The write costs one upsert per
slot touched in the transaction (one or two for a tick's chunk), measured in benchmarks/README.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple

import sqlalchemy as sa

from .schema import ledger_changes
from .url import Backend

if TYPE_CHECKING:
    from .api import Store

__all__ = ["UNSLOTTED", "LedgerChanges", "Marker"]

#: The slot under which rows marked without a slot change their token.
UNSLOTTED = -1


class Marker(NamedTuple):
    """What a reader compares: the slot's token and the unslotted rows' token (None: never written)."""

    slot: int | None
    unslotted: int | None


def fresh_token() -> int:
    """A random non-negative 62-bit token, from the OS's randomness (not a forked Random's state)."""
    return int.from_bytes(os.urandom(8), "big") >> 2


_UPSERT = {
    Backend.SQLITE: (
        "INSERT INTO ledger_changes (job, period, slot, token) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (job, period, slot) DO UPDATE SET token = excluded.token"
    ),
    Backend.POSTGRESQL: (
        "INSERT INTO ledger_changes (job, period, slot, token) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (job, period, slot) DO UPDATE SET token = excluded.token"
    ),
}


class LedgerChanges:
    """Writes (inside the ledger's own transactions) and reads of the change tokens."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._upsert = _UPSERT[store.backend]

    def touch(self, connection: sa.Connection, slots: Iterable[tuple[str, str, int | None]]) -> None:
        """Give each (job, period, slot) written in this transaction a fresh token.

        Sorted, so concurrent writers take the token rows' locks in one order (PostgreSQL).
        """
        token = fresh_token()
        keys = sorted({(job, period, UNSLOTTED if slot is None else slot) for job, period, slot in slots})
        if keys:
            connection.exec_driver_sql(self._upsert, [(*key, token) for key in keys])

    def touch_period(self, connection: sa.Connection, job: str, period: str) -> None:
        """A reset: every slot of the period that has rows gets a fresh token."""
        c = ledger_changes.c
        connection.execute(
            sa.update(ledger_changes).where(c.job == job, c.period == period).values(token=fresh_token())
        )

    def markers(self, job: str, period: str) -> dict[int, int]:
        """The tokens of the period's slots (``UNSLOTTED`` included when it has one): one indexed read."""
        return self.markers_of(job, [period])[period]

    def markers_of(self, job: str, periods: Sequence[str]) -> dict[str, dict[int, int]]:
        """``markers`` of several periods of a job in one read (a period never written maps to {})."""
        c = ledger_changes.c
        found: dict[str, dict[int, int]] = {period: {} for period in periods}
        with self._store.reading() as connection:
            for period, slot, token in connection.execute(
                sa.select(c.period, c.slot, c.token).where(c.job == job, c.period.in_(list(periods)))
            ):
                found[period][int(slot)] = int(token)
        return found

    @staticmethod
    def marker(tokens: dict[int, int], slot: int) -> Marker:
        """The marker of one slot out of ``markers``."""
        return Marker(tokens.get(slot), tokens.get(UNSLOTTED))
