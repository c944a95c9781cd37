"""Record claims of running ticks (``ledger_claims``): no record is handed to two runs at once.

A tick claims each chunk of its records (owner id, lease) in the transaction that re-checks the
ledger, renews the claims while the chunk runs, and deletes them in the transaction that marks the
chunk's outcomes. The table holds only the chunks in flight; a store upgraded from 0007 starts with
it empty, which is what "no run holds anything" means.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from vardiya.store.types import UTCDateTime

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ledger_claims",
        sa.Column("job", sa.String(200), nullable=False),
        sa.Column("period", sa.String(64), nullable=False),
        sa.Column("record", sa.String(500), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("lease_until", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("job", "period", "record", name="pk_ledger_claims"),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("ledger_claims")
