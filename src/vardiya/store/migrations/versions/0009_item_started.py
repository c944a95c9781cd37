"""The started marker of work items (``work_items.started``), and stream offsets that are never reused.

``started``: a claim counts an attempt for every item it takes, and a worker prefetches up to a
hundred; a worker killed with SIGKILL used to charge every one of them an attempt, most never started
(three kills turned 20 of 20 calls dead, 19 of which never ran). The worker now marks its items
started as it reaches them, and a reap charges only those. Items running when this migration runs
were claimed under the old rule, so they count as started.

``stream_records``: SQLite gives a rowid table ``max(id) + 1``, so once every record of the stream had
been cut (deleted), the next append got an offset that had been handed out before. AUTOINCREMENT
never reuses one; its counter starts above every offset still known (waiting records, the lanes'
``cut_through``, the records held by batch items). PostgreSQL's identity sequence never reused them.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None



def _rebuild_stream_records(autoincrement: bool) -> None:
    with op.batch_alter_table(
        "stream_records", recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}
    ):
        pass


def upgrade() -> None:
    op.add_column("work_items", sa.Column("started", sa.Boolean, nullable=False, server_default=sa.false()))
    op.execute(sa.text("UPDATE work_items SET started = :yes WHERE state = 'running'").bindparams(yes=True))
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_stream_records(autoincrement=True)
        bind = op.get_bind()
        highest = max(
            bind.exec_driver_sql("SELECT max(id) FROM stream_records").scalar() or 0,
            bind.exec_driver_sql("SELECT max(cut_through) FROM stream_lanes").scalar() or 0,
            bind.exec_driver_sql(
                "SELECT max(CAST(json_extract(r.value, '$[0]') AS INTEGER))"
                " FROM work_items AS w, json_each(w.payload, '$.records') AS r WHERE w.kind LIKE 'batch:%'"
            ).scalar() or 0,
        )
        bind.exec_driver_sql("DELETE FROM sqlite_sequence WHERE name = 'stream_records'")
        bind.exec_driver_sql("INSERT INTO sqlite_sequence (name, seq) VALUES ('stream_records', ?)", (highest,))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_stream_records(autoincrement=False)
    op.drop_column("work_items", "started")
