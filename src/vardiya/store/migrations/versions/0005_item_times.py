"""Work-item times as integers on SQLite: microseconds since 1970-01-01 UTC (``types.UTCMicros``).

The columns keep their declared type (``DATETIME``, NUMERIC affinity, which stores an integer as an
integer), so only the values change, in place: no table rebuild, which on SQLite would mean dropping
``work_items`` under the foreign keys of the attempts, dedup keys, stream lanes and call log.
``UTCDateTime``'s text is ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC. PostgreSQL keeps ``timestamptz``:
nothing to do there.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Callable

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

COLUMNS = ("run_after", "lease_until", "claimed_at", "created_at", "updated_at")


def _to_micros(column: str) -> str:
    # Whole seconds from strftime('%s') (negative before 1970), then the fraction padded to 6 digits.
    return (
        f"CAST(strftime('%s', substr({column}, 1, 19)) AS INTEGER) * 1000000"
        f" + CAST(substr({column} || '000000', 21, 6) AS INTEGER)"
    )


def _to_text(column: str) -> str:
    # SQLite's integer division truncates towards zero: floor it for times before 1970.
    seconds = f"({column} / 1000000 - ({column} % 1000000 < 0))"
    fraction = f"(({column} % 1000000 + 1000000) % 1000000)"
    return (
        f"strftime('%Y-%m-%d %H:%M:%S', {seconds}, 'unixepoch')"
        f" || '.' || substr('000000' || {fraction}, -6)"
    )


def _convert(expression: Callable[[str], str], stored: str) -> None:
    for column in COLUMNS:
        op.execute(f"UPDATE work_items SET {column} = {expression(column)} WHERE typeof({column}) = '{stored}'")


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _convert(_to_micros, "text")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _convert(_to_text, "integer")
