"""What is paused: one row per paused slot job, handler, periodic function, pipeline or trigger.

``vardiya pause NAME`` writes a row, ``vardiya resume NAME`` deletes it; every scheduler and worker reads
the table, so a pause holds for the whole fleet and outlives the processes that honour it.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from vardiya.store.types import UTCDateTime

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "paused",
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(500), nullable=False),
        sa.Column("paused_at", UTCDateTime, nullable=False),
        sa.Column("reason", sa.String(500)),
        sa.PrimaryKeyConstraint("kind", "name", name="pk_paused"),
    )


def downgrade() -> None:
    op.drop_table("paused")
