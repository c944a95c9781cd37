"""A change token per (job, period, slot) of the ledger (``ledger_changes``).

Every ledger write sets the tokens of the slots it wrote; readers that keep a slot's open records
between ticks or requests check the token instead of reading the slot's keys again. A store upgraded
from 0013 gets one token per (job, period, slot) its ledger already holds (slot -1 for rows marked
without a slot), each random, so nothing a process remembered from before the upgrade can match.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# A random non-negative 62-bit integer per row, in each dialect's own words.
_RANDOM = {
    "sqlite": "(random() & 4611686018427387903)",
    "postgresql": "CAST(floor(random() * 4611686018427387903) AS BIGINT)",
}


def upgrade() -> None:
    op.create_table(
        "ledger_changes",
        sa.Column("job", sa.String(200), nullable=False),
        sa.Column("period", sa.String(64), nullable=False),
        sa.Column("slot", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("token", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("job", "period", "slot", name="pk_ledger_changes"),
        sqlite_with_rowid=False,
    )
    random = _RANDOM[op.get_bind().dialect.name]
    op.execute(
        "INSERT INTO ledger_changes (job, period, slot, token) "
        f"SELECT job, period, slot, {random} FROM "
        "(SELECT DISTINCT job, period, COALESCE(slot, -1) AS slot FROM ledger) AS written"
    )


def downgrade() -> None:
    op.drop_table("ledger_changes")
