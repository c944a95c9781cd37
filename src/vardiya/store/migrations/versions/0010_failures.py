"""What failed and why: the traceback of every failure, and the runs that went over their SLA.

- ``ledger_failures``: the last failure of each failed ledger record (its error line, its traceback,
  when). A table beside the ledger, not columns in it: the ledger's upsert is the tick's hot statement
  and most records never fail, so the ledger row stays as narrow as it was; a failure costs one more
  row, written in its own statement only when a chunk had failures.
- ``work_item_attempts.traceback`` and ``pipeline_task_runs.traceback``: the traceback of a failed
  attempt of a work item and of a pipeline task, beside the error line those rows already keep.
- ``sla_misses``: per (family, name) of a slot job, handler or pipeline stage with an ``sla``, how many
  of its runs went over it and the last one that did: what ``vardiya status`` and the services'
  ``vardiya_sla_missed_total`` read.

Tracebacks are bounded (the last 8 KB, cut at a line boundary, ``vardiya.tracebacks``).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from vardiya.store.types import UTCDateTime

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ledger_failures",
        sa.Column("job", sa.String(200), nullable=False),
        sa.Column("period", sa.String(64), nullable=False),
        sa.Column("record", sa.String(500), nullable=False),
        sa.Column("failed_at", UTCDateTime, nullable=False),
        sa.Column("error", sa.Text, nullable=False),
        sa.Column("traceback", sa.Text),
        sa.PrimaryKeyConstraint("job", "period", "record", name="pk_ledger_failures"),
    )
    op.create_index("ix_ledger_failures_failed_at", "ledger_failures", ["failed_at"])
    op.add_column("work_item_attempts", sa.Column("traceback", sa.Text))
    op.add_column("pipeline_task_runs", sa.Column("traceback", sa.Text))
    op.create_table(
        "sla_misses",
        sa.Column("family", sa.String(16), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("missed", sa.BigInteger, nullable=False),
        sa.Column("expected_ms", sa.Float, nullable=False),
        sa.Column("last_took_ms", sa.Float, nullable=False),
        sa.Column("last_ref", sa.String(500), nullable=False),
        sa.Column("last_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("family", "name", name="pk_sla_misses"),
    )


def downgrade() -> None:
    op.drop_table("sla_misses")
    with op.batch_alter_table("pipeline_task_runs") as batch:
        batch.drop_column("traceback")
    with op.batch_alter_table("work_item_attempts") as batch:
        batch.drop_column("traceback")
    op.drop_index("ix_ledger_failures_failed_at", table_name="ledger_failures")
    op.drop_table("ledger_failures")
