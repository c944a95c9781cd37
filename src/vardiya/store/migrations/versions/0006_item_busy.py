"""How long the handler of a successful async call ran, on the call's work item (``work_items.busy_ms``).

A successful async call used to write a row to ``invocation_calls`` as well as ending its item: the
largest share of a worker's database time on PostgreSQL (the row's foreign-key check and two indexes;
about 13 µs of server time per call, more than the claim) and 15-25 % of an async drain on either
backend. The item now carries the one figure the metrics need from such a call, its busy time; the
call log keeps every failed call and every stream batch's call. NULL on every other item.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A nullable column without a default: no rewrite of the table on either backend.
    op.add_column("work_items", sa.Column("busy_ms", sa.Float))


def downgrade() -> None:
    # The calls told only by their items go back to the call log, where revision 0005 counts them.
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "INSERT INTO invocation_calls (handler, item_id, attempt, started_at, ended_at, busy_ms, records, failed,"
            " outcome, error) SELECT substr(w.kind, 6), w.id, w.attempts, w.updated_at - w.busy_ms * interval"
            " '1 millisecond', w.updated_at, w.busy_ms, 1, 0, 'succeeded', NULL FROM work_items AS w"
            " WHERE w.busy_ms IS NOT NULL"
        )
    else:
        # SQLite: item times are integer microseconds (0005), the call log keeps UTCDateTime text.
        text = (
            "strftime('%Y-%m-%d %H:%M:%S', {t} / 1000000, 'unixepoch') || '.' || substr('000000' || ({t} % 1000000), -6)"
        )
        begun = "(w.updated_at - CAST(w.busy_ms * 1000 AS INTEGER))"
        op.execute(
            "INSERT INTO invocation_calls (handler, item_id, attempt, started_at, ended_at, busy_ms, records, failed,"
            f" outcome, error) SELECT substr(w.kind, 6), w.id, w.attempts, {text.format(t=begun)},"
            f" {text.format(t='w.updated_at')}, w.busy_ms, 1, 0, 'succeeded', NULL FROM work_items AS w"
            " WHERE w.busy_ms IS NOT NULL"
        )
    op.drop_column("work_items", "busy_ms")
