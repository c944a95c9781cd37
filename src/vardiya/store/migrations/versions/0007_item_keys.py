"""Work-item idempotency keys in a table of their own (``work_item_keys``), written once per item.

A claim and a completion change an item's state, so on PostgreSQL each makes a new row version with a
new entry in every index of ``work_items`` (no HOT update: the partial indexes read the state). The
unique (kind, key) index was the widest of them: without it one worker thread drained a third more
calls (benchmarks/README.md). The keys now live where nothing updates them; an enqueue inserts the
key first (``ON CONFLICT DO NOTHING``) and the item only for a key that was new.

PostgreSQL drops the old constraint. SQLite keeps it: dropping it means rebuilding ``work_items``
under the foreign keys of every table that refers to it, and SQLite's updates never touch an index
whose columns they do not change, so it costs them nothing.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

Identifier = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "work_item_keys",
        sa.Column("kind", sa.String(200), nullable=False),
        sa.Column("key", sa.String(500), nullable=False),
        sa.Column("item_id", Identifier, nullable=False),
        sa.PrimaryKeyConstraint("kind", "key", name="pk_work_item_keys"),
        sqlite_with_rowid=False,
    )
    op.execute("INSERT INTO work_item_keys (kind, key, item_id) SELECT kind, key, id FROM work_items")
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint("uq_work_items_kind_key", "work_items", type_="unique")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_unique_constraint("uq_work_items_kind_key", "work_items", ["kind", "key"])
    op.drop_table("work_item_keys")
