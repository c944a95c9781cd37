"""Invocation models: the store-backed stream (records and lanes) and the handler-call log.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from vardiya.store.types import UTCDateTime

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

Identifier = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSONDocument = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "stream_records",
        sa.Column("id", Identifier, primary_key=True, autoincrement=True),
        sa.Column("stream", sa.String(200), nullable=False),
        sa.Column("lane", sa.Integer, nullable=False),
        sa.Column("key", sa.String(500)),
        sa.Column("payload", JSONDocument, nullable=False),
        sa.Column("appended_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_stream_records"),
    )
    op.create_index("ix_stream_records_stream", "stream_records", ["stream", "lane", "id"])

    op.create_table(
        "stream_lanes",
        sa.Column("stream", sa.String(200), nullable=False),
        sa.Column("lane", sa.Integer, nullable=False),
        sa.Column("open_item", Identifier),
        sa.Column("cut_through", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("stream", "lane", name="pk_stream_lanes"),
        sa.ForeignKeyConstraint(
            ["open_item"], ["work_items.id"], ondelete="SET NULL", name="fk_stream_lanes_open_item"
        ),
    )

    op.create_table(
        "invocation_calls",
        sa.Column("id", Identifier, primary_key=True, autoincrement=True),
        sa.Column("handler", sa.String(200), nullable=False),
        sa.Column("item_id", Identifier, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("ended_at", UTCDateTime, nullable=False),
        sa.Column("busy_ms", sa.Float, nullable=False),
        sa.Column("records", sa.Integer, nullable=False),
        sa.Column("failed", sa.Integer, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("error", sa.Text),
        sa.PrimaryKeyConstraint("id", name="pk_invocation_calls"),
        sa.ForeignKeyConstraint(
            ["item_id"], ["work_items.id"], ondelete="CASCADE", name="fk_invocation_calls_item_id"
        ),
    )
    op.create_index("ix_invocation_calls_handler", "invocation_calls", ["handler", "started_at"])
    op.create_index("ix_invocation_calls_item_id", "invocation_calls", ["item_id"])


def downgrade() -> None:
    op.drop_table("invocation_calls")
    op.drop_table("stream_lanes")
    op.drop_index("ix_stream_records_stream", table_name="stream_records")
    op.drop_table("stream_records")
