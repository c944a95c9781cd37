"""Named queues and shared rate limits for work items.

- ``work_items.queue``: the named queue of an item (a handler's ``queue=``; "default" for every other
  item and every item already stored), with ``ix_work_items_queue_ready``, the ready items of each queue
  in claim order, which a claim restricted to some queues (``vardiya worker --queue``) reads.
- ``rate_buckets``: one token bucket per rate-limited handler, refilled and taken in the claim's
  transaction, so every worker of the store shares the handler's ``rate_limit``.

Revision ID: 0013
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from vardiya.store.types import UTCMicros

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_READY = sa.text("state IN ('pending', 'failed')")


def upgrade() -> None:
    # A plain ADD COLUMN with a constant default: no table rebuild on SQLite, no rewrite on PostgreSQL.
    op.add_column("work_items", sa.Column("queue", sa.String(190), nullable=False, server_default="default"))
    op.create_index(
        "ix_work_items_queue_ready",
        "work_items",
        ["queue", "run_after", "id"],
        postgresql_where=_READY,
        sqlite_where=_READY,
    )
    op.create_table(
        "rate_buckets",
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("tokens", sa.Float, nullable=False),
        sa.Column("refilled_at", UTCMicros, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_rate_buckets"),
    )


def downgrade() -> None:
    op.drop_table("rate_buckets")
    op.drop_index("ix_work_items_queue_ready", table_name="work_items")
    # ALTER TABLE ... DROP COLUMN, not a batch rebuild: rebuilding work_items on SQLite would cascade
    # to the tables whose foreign keys refer to it (their history and call-log rows).
    op.drop_column("work_items", "queue")
