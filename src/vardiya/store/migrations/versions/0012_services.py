"""The services alive: one row per scheduler or worker process, beaten while it runs.

Each row says where the process runs (host, pid), which app and what of it (``runs``), when it started
and when it last beat; the beat interval is kept with it, so a reader can tell a live service (a beat
within three intervals) from one that died without stopping. A clean stop deletes its row.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from vardiya.store.types import UTCDateTime

revision = "0012"
# The lead re-chains the numbers at merge: 0011 (paused) comes first in this branch.
down_revision = "0011"
branch_labels = None
depends_on = None

JSONDocument = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "services",
        sa.Column("id", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("app", sa.String(500)),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("beat_at", UTCDateTime, nullable=False),
        sa.Column("interval_s", sa.Float, nullable=False),
        sa.Column("runs", JSONDocument, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_services"),
    )


def downgrade() -> None:
    op.drop_table("services")
