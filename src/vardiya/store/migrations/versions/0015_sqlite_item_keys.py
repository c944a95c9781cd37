"""SQLite: the work item's own unique (kind, key) index is its idempotency key; ``work_item_keys`` empties.

Migration 0007 moved the keys into ``work_item_keys`` so that PostgreSQL could drop the (kind, key)
index of ``work_items``, which every claim and completion rewrote. SQLite kept that index (its updates
never touch an index whose columns they do not change), so on SQLite every key was kept twice, and an
enqueue checked one table and wrote two. Now SQLite's enqueue inserts the item alone (``ON CONFLICT
(kind, key) DO NOTHING``: a single submit is one statement) and its reads find items by that index;
the key rows are deleted. The table stays, empty, so both backends have one schema. PostgreSQL is
unchanged. The revision also keeps a vardiya of before it (which checks ``work_item_keys`` on SQLite)
from writing to a store migrated past it: it refuses a store at a revision it does not know.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DELETE FROM work_item_keys")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("INSERT INTO work_item_keys (kind, key, item_id) SELECT kind, key, id FROM work_items")
