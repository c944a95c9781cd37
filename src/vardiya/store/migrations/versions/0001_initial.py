"""The first schema: work items with attempt history, the ledger, dedup keys.

Revision ID: 0001
Revises:
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from vardiya.store.types import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

Identifier = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSONDocument = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
READY = sa.text("state IN ('pending', 'failed')")
RUNNING = sa.text("state = 'running'")
DEAD = sa.text("state = 'dead'")


def _enum(name: str, *values: str) -> sa.Enum:
    return sa.Enum(*values, name=name, native_enum=False, create_constraint=False, length=16)


def upgrade() -> None:
    op.create_table(
        "work_items",
        sa.Column("id", Identifier, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(200), nullable=False),
        sa.Column("key", sa.String(500), nullable=False),
        sa.Column("payload", JSONDocument, nullable=False),
        sa.Column("state", _enum("item_state", "pending", "running", "succeeded", "failed", "dead"), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("max_attempts", sa.Integer, nullable=False),
        sa.Column("run_after", UTCDateTime, nullable=False),
        sa.Column("lease_owner", sa.String(200)),
        sa.Column("lease_until", UTCDateTime),
        sa.Column("claimed_at", UTCDateTime),
        sa.Column("last_error", sa.Text),
        sa.Column("result", JSONDocument),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_work_items"),
        sa.UniqueConstraint("kind", "key", name="uq_work_items_kind_key"),
    )
    op.create_index("ix_work_items_ready", "work_items", ["run_after", "id"], postgresql_where=READY, sqlite_where=READY)
    op.create_index("ix_work_items_leased", "work_items", ["lease_until"], postgresql_where=RUNNING, sqlite_where=RUNNING)
    op.create_index(
        "ix_work_items_dead", "work_items", ["kind", "updated_at"], postgresql_where=DEAD, sqlite_where=DEAD
    )

    op.create_table(
        "work_item_attempts",
        sa.Column("id", Identifier, primary_key=True, autoincrement=True),
        sa.Column("item_id", Identifier, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("owner", sa.String(200)),
        sa.Column("started_at", UTCDateTime),
        sa.Column("ended_at", UTCDateTime, nullable=False),
        sa.Column("outcome", _enum("attempt_outcome", "succeeded", "failed", "lease_expired"), nullable=False),
        sa.Column("error", sa.Text),
        sa.PrimaryKeyConstraint("id", name="pk_work_item_attempts"),
        sa.ForeignKeyConstraint(
            ["item_id"], ["work_items.id"], name="fk_work_item_attempts_item_id", ondelete="CASCADE"
        ),
    )
    op.create_index("ix_work_item_attempts_item_id", "work_item_attempts", ["item_id"])

    op.create_table(
        "ledger",
        sa.Column("job", sa.String(200), nullable=False),
        sa.Column("period", sa.String(64), nullable=False),
        sa.Column("record", sa.String(500), nullable=False),
        sa.Column("slot", sa.Integer),
        sa.Column("status", _enum("ledger_status", "done", "failed"), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("first_attempt_at", UTCDateTime),
        sa.Column("last_attempt_at", UTCDateTime),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("rows", sa.BigInteger, nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("error", sa.Text),
        sa.PrimaryKeyConstraint("job", "period", "record", name="pk_ledger"),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_ledger_job_period_slot", "ledger", ["job", "period", "slot", "status", "attempts"])

    op.create_table(
        "dedup_keys",
        sa.Column("scope", sa.String(200), nullable=False),
        sa.Column("key", sa.String(500), nullable=False),
        sa.Column("first_seen", UTCDateTime, nullable=False),
        sa.Column("expires_at", UTCDateTime, nullable=False),
        sa.Column("outcome", _enum("dedup_outcome", "pending", "succeeded", "failed"), nullable=False),
        sa.Column("result", JSONDocument),
        sa.Column("item_id", Identifier),
        sa.PrimaryKeyConstraint("scope", "key", name="pk_dedup_keys"),
        sa.ForeignKeyConstraint(["item_id"], ["work_items.id"], name="fk_dedup_keys_item_id", ondelete="SET NULL"),
    )
    op.create_index("ix_dedup_keys_expires_at", "dedup_keys", ["expires_at"])
    op.create_index("ix_dedup_keys_item_id", "dedup_keys", ["item_id"])


def downgrade() -> None:
    op.drop_table("dedup_keys")
    op.drop_table("ledger")
    op.drop_index("ix_work_item_attempts_item_id", table_name="work_item_attempts")
    op.drop_table("work_item_attempts")
    op.drop_table("work_items")
