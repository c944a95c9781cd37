"""Partitioned pipelines: runs, task checkpoints, attempt history, lineage of reads.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from vardiya.store.types import UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

Identifier = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
JSONDocument = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
TASK_STATES = ("pending", "running", "succeeded", "failed", "blocked", "skipped")


def _enum(name: str, *values: str) -> sa.Enum:
    return sa.Enum(*values, name=name, native_enum=False, create_constraint=False, length=16)


def upgrade() -> None:
    op.create_table(
        "pipeline_runs",
        sa.Column("id", Identifier, primary_key=True, autoincrement=True),
        sa.Column("pipeline", sa.String(200), nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("finished_at", UTCDateTime),
        sa.Column(
            "state",
            _enum("pipeline_run_state", "running", "succeeded", "failed", "interrupted"),
            nullable=False,
        ),
        sa.Column("options", JSONDocument, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_pipeline_runs"),
    )
    op.create_index("ix_pipeline_runs_pipeline", "pipeline_runs", ["pipeline", "id"])

    op.create_table(
        "pipeline_tasks",
        sa.Column("pipeline", sa.String(200), nullable=False),
        sa.Column("task", sa.String(500), nullable=False),
        sa.Column("state", _enum("pipeline_task_state", *TASK_STATES), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("run_id", Identifier),
        sa.Column("started_at", UTCDateTime),
        sa.Column("finished_at", UTCDateTime),
        sa.Column("error", sa.Text),
        sa.Column("output_path", sa.Text),
        sa.Column("output_fingerprint", sa.String(64)),
        sa.Column("rows", sa.BigInteger),
        sa.Column("materialized_at", UTCDateTime),
        sa.Column("materialized_run_id", Identifier),
        sa.PrimaryKeyConstraint("pipeline", "task", name="pk_pipeline_tasks"),
        sa.ForeignKeyConstraint(["run_id"], ["pipeline_runs.id"], name="fk_pipeline_tasks_run_id", ondelete="SET NULL"),
    )
    op.create_index("ix_pipeline_tasks_run_id", "pipeline_tasks", ["run_id"])

    op.create_table(
        "pipeline_task_runs",
        sa.Column("id", Identifier, primary_key=True, autoincrement=True),
        sa.Column("run_id", Identifier, nullable=False),
        sa.Column("pipeline", sa.String(200), nullable=False),
        sa.Column("task", sa.String(500), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("state", _enum("pipeline_task_state", *TASK_STATES), nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("finished_at", UTCDateTime),
        sa.Column("error", sa.Text),
        sa.PrimaryKeyConstraint("id", name="pk_pipeline_task_runs"),
        sa.ForeignKeyConstraint(
            ["run_id"], ["pipeline_runs.id"], name="fk_pipeline_task_runs_run_id", ondelete="CASCADE"
        ),
    )
    op.create_index("ix_pipeline_task_runs_run_id", "pipeline_task_runs", ["run_id"])
    op.create_index("ix_pipeline_task_runs_pipeline", "pipeline_task_runs", ["pipeline", "task"])

    op.create_table(
        "pipeline_reads",
        sa.Column("run_id", Identifier, nullable=False),
        sa.Column("task", sa.String(500), nullable=False),
        sa.Column("read_stage", sa.String(200), nullable=False),
        sa.Column("read_partition", sa.String(200), nullable=False),
        sa.Column("declared", sa.Boolean, nullable=False),
        sa.PrimaryKeyConstraint("run_id", "task", "read_stage", "read_partition", name="pk_pipeline_reads"),
        sa.ForeignKeyConstraint(["run_id"], ["pipeline_runs.id"], name="fk_pipeline_reads_run_id", ondelete="CASCADE"),
    )


def downgrade() -> None:
    op.drop_table("pipeline_reads")
    op.drop_index("ix_pipeline_task_runs_pipeline", table_name="pipeline_task_runs")
    op.drop_index("ix_pipeline_task_runs_run_id", table_name="pipeline_task_runs")
    op.drop_table("pipeline_task_runs")
    op.drop_index("ix_pipeline_tasks_run_id", table_name="pipeline_tasks")
    op.drop_table("pipeline_tasks")
    op.drop_index("ix_pipeline_runs_pipeline", table_name="pipeline_runs")
    op.drop_table("pipeline_runs")
