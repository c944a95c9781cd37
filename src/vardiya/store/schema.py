"""The one schema of the state store, in SQLAlchemy Core.

The Alembic migrations under ``migrations/versions`` must produce exactly these tables; a contract test
compares a migrated database with this metadata on both backends.
"""

from __future__ import annotations

import enum

import sqlalchemy as sa

from .records import AttemptOutcome, DedupOutcome, ItemState, LedgerStatus
from .types import JSONDocument, UTCDateTime

__all__ = ["attempts", "dedup_keys", "ledger", "metadata", "work_items"]

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL gets a BIGINT identity.
Identifier = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _state_enum(enum_class: type[enum.Enum], name: str) -> sa.Enum:
    """An Enum column stored as short text on both backends (no native PostgreSQL type to migrate)."""
    return sa.Enum(
        enum_class,
        name=name,
        native_enum=False,
        create_constraint=False,
        length=16,
        values_callable=lambda members: [member.value for member in members],
        validate_strings=True,
    )


_ready = sa.text("state IN ('pending', 'failed')")

work_items = sa.Table(
    "work_items",
    metadata,
    sa.Column("id", Identifier, primary_key=True, autoincrement=True),
    sa.Column("kind", sa.String(200), nullable=False),
    sa.Column("key", sa.String(500), nullable=False),
    sa.Column("payload", JSONDocument, nullable=False),
    sa.Column("state", _state_enum(ItemState, "item_state"), nullable=False),
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
    sa.UniqueConstraint("kind", "key", name="uq_work_items_kind_key"),
    # Claims read this partial index in (run_after, id) order; claimed and finished rows are not in it,
    # so a claim never rescans them.
    sa.Index(
        "ix_work_items_ready",
        "run_after",
        "id",
        postgresql_where=_ready,
        sqlite_where=_ready,
    ),
    sa.Index(
        "ix_work_items_leased",
        "lease_until",
        postgresql_where=sa.text("state = 'running'"),
        sqlite_where=sa.text("state = 'running'"),
    ),
    # Dead letters are listed by kind and age; a partial index keeps the hot path free of its upkeep.
    sa.Index(
        "ix_work_items_dead",
        "kind",
        "updated_at",
        postgresql_where=sa.text("state = 'dead'"),
        sqlite_where=sa.text("state = 'dead'"),
    ),
)

attempts = sa.Table(
    "work_item_attempts",
    metadata,
    sa.Column("id", Identifier, primary_key=True, autoincrement=True),
    sa.Column(
        "item_id",
        Identifier,
        sa.ForeignKey("work_items.id", ondelete="CASCADE", name="fk_work_item_attempts_item_id"),
        nullable=False,
    ),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("owner", sa.String(200)),
    sa.Column("started_at", UTCDateTime),
    sa.Column("ended_at", UTCDateTime, nullable=False),
    sa.Column("outcome", _state_enum(AttemptOutcome, "attempt_outcome"), nullable=False),
    sa.Column("error", sa.Text),
    sa.Index("ix_work_item_attempts_item_id", "item_id"),
)

ledger = sa.Table(
    "ledger",
    metadata,
    sa.Column("job", sa.String(200), primary_key=True),
    sa.Column("period", sa.String(64), primary_key=True),
    sa.Column("record", sa.String(500), primary_key=True),
    sa.Column("slot", sa.Integer),
    sa.Column("status", _state_enum(LedgerStatus, "ledger_status"), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("first_attempt_at", UTCDateTime),
    sa.Column("last_attempt_at", UTCDateTime),
    sa.Column("duration_ms", sa.Float, nullable=False),
    sa.Column("rows", sa.BigInteger, nullable=False),
    sa.Column("bytes", sa.BigInteger, nullable=False),
    sa.Column("error", sa.Text),
    # Per-slot questions (is a slot settled? which of its records are? the balance report) read one
    # slot of one period; status and attempts make the counts index-only.
    sa.Index("ix_ledger_job_period_slot", "job", "period", "slot", "status", "attempts"),
    sqlite_with_rowid=False,
)

dedup_keys = sa.Table(
    "dedup_keys",
    metadata,
    sa.Column("scope", sa.String(200), primary_key=True),
    sa.Column("key", sa.String(500), primary_key=True),
    sa.Column("first_seen", UTCDateTime, nullable=False),
    sa.Column("expires_at", UTCDateTime, nullable=False),
    sa.Column("outcome", _state_enum(DedupOutcome, "dedup_outcome"), nullable=False),
    sa.Column("result", JSONDocument),
    sa.Column(
        "item_id",
        Identifier,
        sa.ForeignKey("work_items.id", ondelete="SET NULL", name="fk_dedup_keys_item_id"),
    ),
    sa.Index("ix_dedup_keys_expires_at", "expires_at"),
    sa.Index("ix_dedup_keys_item_id", "item_id"),
)
