"""Services: the scheduler's per-schedule progress (how far each slot job and trigger has planned), and
the rows each pipeline task attempt published (what tells an empty triggered run).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from vardiya.store.types import UTCDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("name", sa.String(500), nullable=False),
        sa.Column("planned_through", UTCDateTime),
        sa.Column("fired", sa.BigInteger, nullable=False),
        sa.Column("skipped", sa.BigInteger, nullable=False),
        sa.Column("skipped_from", UTCDateTime),
        sa.Column("skipped_to", UTCDateTime),
        sa.Column("checked_at", UTCDateTime),
        sa.Column("updated_by", sa.String(200)),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_schedules"),
    )
    with op.batch_alter_table("pipeline_task_runs") as batch:
        batch.add_column(sa.Column("rows", sa.Integer))


def downgrade() -> None:
    with op.batch_alter_table("pipeline_task_runs") as batch:
        batch.drop_column("rows")
    op.drop_table("schedules")
