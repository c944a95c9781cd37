"""The one schema of the state store, in SQLAlchemy Core.

The Alembic migrations under ``migrations/versions`` must produce exactly these tables; a contract test
compares a migrated database with this metadata on both backends.
"""

from __future__ import annotations

import enum

import sqlalchemy as sa

from ..states import RunState, TaskState
from .records import AttemptOutcome, DedupOutcome, ItemState, LedgerStatus
from .types import JSONDocument, UTCDateTime, UTCMicros

__all__ = [
    "RunState",
    "TaskState",
    "attempts",
    "dedup_keys",
    "ledger",
    "ledger_changes",
    "ledger_claims",
    "ledger_failures",
    "metadata",
    "pipeline_reads",
    "pipeline_runs",
    "pipeline_task_runs",
    "pipeline_tasks",
    "paused",
    "rate_buckets",
    "schedules",
    "services",
    "sla_misses",
    "invocation_calls",
    "stream_lanes",
    "stream_records",
    "work_item_keys",
    "work_items",
]

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


# Partial indexes' conditions: the state names come from the Enum, the text is what the migrations wrote.
_ready = sa.text(f"state IN ('{ItemState.PENDING.value}', '{ItemState.FAILED.value}')")
_running = sa.text(f"state = '{ItemState.RUNNING.value}'")
_dead = sa.text(f"state = '{ItemState.DEAD.value}'")

# The times are UTCMicros: on SQLite an integer of microseconds (migration 0005), in columns still
# declared DATETIME; every other table keeps UTCDateTime's text.
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
    sa.Column("run_after", UTCMicros, nullable=False),
    sa.Column("lease_owner", sa.String(200)),
    sa.Column("lease_until", UTCMicros),
    sa.Column("claimed_at", UTCMicros),
    sa.Column("last_error", sa.Text),
    sa.Column("result", JSONDocument),
    sa.Column("created_at", UTCMicros, nullable=False),
    sa.Column("updated_at", UTCMicros, nullable=False),
    # How long the handler ran in a successful async call (migration 0006): such a call is told by its
    # item, not by a call-log row (see invocation_calls). NULL on every other item.
    sa.Column("busy_ms", sa.Float),
    # Whether the handler of the current attempt has started (migration 0009). A claim counts the
    # attempt, and a worker marks its prefetched items started only as it reaches them (in bulk,
    # ``WorkItems.start``): a lease that runs out charges the attempt to a started item only; one that
    # never started goes back to ready as if never claimed.
    sa.Column("started", sa.Boolean, nullable=False, server_default=sa.false()),
    # The named queue of the item (migration 0013): a handler's ``queue=``, "default" for everything else.
    # ``vardiya worker --queue NAME`` claims only the items of its queues.
    sa.Column("queue", sa.String(190), nullable=False, server_default="default"),
    # (kind, key) is unique through ``work_item_keys`` on PostgreSQL (migration 0007), which dropped
    # this index. SQLite keeps it, and it is SQLite's key (migration 0015: an enqueue inserts the item
    # alone, ON CONFLICT DO NOTHING): it costs SQLite's updates nothing (they only touch indexes whose
    # columns change).
    sa.UniqueConstraint("kind", "key", name="uq_work_items_kind_key").ddl_if(dialect="sqlite"),
    # Claims read this partial index in (run_after, id) order; claimed and finished rows are not in it,
    # so a claim never rescans them.
    sa.Index(
        "ix_work_items_ready",
        "run_after",
        "id",
        postgresql_where=_ready,
        sqlite_where=_ready,
    ),
    # A claim restricted to some queues reads this one: the ready items of each queue in (run_after, id)
    # order, so a worker of a quiet queue never walks the busy queues' rows.
    sa.Index(
        "ix_work_items_queue_ready",
        "queue",
        "run_after",
        "id",
        postgresql_where=_ready,
        sqlite_where=_ready,
    ),
    sa.Index(
        "ix_work_items_leased",
        "lease_until",
        postgresql_where=_running,
        sqlite_where=_running,
    ),
    # Dead letters are listed by kind and age; a partial index keeps the hot path free of its upkeep.
    sa.Index(
        "ix_work_items_dead",
        "kind",
        "updated_at",
        postgresql_where=_dead,
        sqlite_where=_dead,
    ),
)

# PostgreSQL: the idempotency key of every work item, in a table of its own that is written once,
# when the item is, and never updated. (SQLite keeps the table empty: its ``work_items`` has the unique
# (kind, key) index, which is the key there; migration 0015.) On ``work_items`` a unique (kind, key) index is rewritten by every claim and
# every completion on PostgreSQL (the state change makes each update a new row version with a new
# entry in every index), and it was the widest of them: a third of a worker's database time
# (benchmarks/README.md). No foreign key: deleting an item deletes its key in the same transaction
# (``WorkItems.purge``), and a key row checked against ``work_items`` on every enqueue would cost
# what this table saves.
work_item_keys = sa.Table(
    "work_item_keys",
    metadata,
    sa.Column("kind", sa.String(200), nullable=False),
    sa.Column("key", sa.String(500), nullable=False),
    sa.Column("item_id", Identifier, nullable=False),
    sa.PrimaryKeyConstraint("kind", "key", name="pk_work_item_keys"),
    # SQLite: the rows are the primary key's b-tree (no rowid table beside it), one write per key
    sqlite_with_rowid=False,
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
    # The failed attempt's traceback, bounded (migration 0010, ``vardiya.tracebacks``).
    sa.Column("traceback", sa.Text),
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

# The last failure of each failed ledger record: its error line, its traceback and when (migration
# 0010). Beside the ledger, not in it: the ledger's upsert is a tick's hot statement and most records
# never fail, so its row stays narrow; a chunk with failures writes their rows in one more statement.
# A record that later succeeds keeps its row here (it is what last failed, and ``vardiya errors``
# says the record's state now from the ledger).
ledger_failures = sa.Table(
    "ledger_failures",
    metadata,
    sa.Column("job", sa.String(200), primary_key=True),
    sa.Column("period", sa.String(64), primary_key=True),
    sa.Column("record", sa.String(500), primary_key=True),
    sa.Column("failed_at", UTCDateTime, nullable=False),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("traceback", sa.Text),
    # ``vardiya errors`` lists the newest first
    sa.Index("ix_ledger_failures_failed_at", "failed_at"),
)

# A change token per (job, period, slot) of the ledger (migration 0014): every transaction that writes
# ledger rows sets the token of each slot it wrote (slot -1: rows marked without a slot) to a fresh
# random value, and a reset sets every token of its period. So "has this slot's ledger changed since I
# read it?" is one indexed read, exactly: a reader that read the token before the rows and finds it
# again knows the rows are the same, which lets the sources keep a slot's open records between ticks
# and the reports between requests instead of reading the slot's keys again (slots/sources.py).
# Random, not a counter: a store recreated under the same URL cannot repeat a token a reader holds.
ledger_changes = sa.Table(
    "ledger_changes",
    metadata,
    sa.Column("job", sa.String(200), primary_key=True),
    sa.Column("period", sa.String(64), primary_key=True),
    sa.Column("slot", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("token", sa.BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

# Which run holds which records right now (migration 0008): a tick claims each chunk of records, with
# its owner id and a lease, before the handler sees them, and deletes the claims in the transaction that
# marks the chunk's outcomes. A second run of the slot skips what a live claim holds; a lease that ran
# out means its run died, and the next run takes the records. Rows live only while a chunk runs.
ledger_claims = sa.Table(
    "ledger_claims",
    metadata,
    sa.Column("job", sa.String(200), primary_key=True),
    sa.Column("period", sa.String(64), primary_key=True),
    sa.Column("record", sa.String(500), primary_key=True),
    sa.Column("owner", sa.String(200), nullable=False),
    sa.Column("lease_until", UTCDateTime, nullable=False),
    # No index on the owner: a run renews and releases its claims by key, one b-tree write per record.
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


# -- partitioned pipelines ---------------------------------------------------------------------------
# The enums live here rather than in vardiya.pipeline: the pipeline package imports the store, so the
# store's schema cannot import the pipeline package without a cycle. vardiya.pipeline re-exports them.


pipeline_runs = sa.Table(
    "pipeline_runs",
    metadata,
    sa.Column("id", Identifier, primary_key=True, autoincrement=True),
    sa.Column("pipeline", sa.String(200), nullable=False),
    sa.Column("started_at", UTCDateTime, nullable=False),
    sa.Column("finished_at", UTCDateTime),
    sa.Column("state", _state_enum(RunState, "pipeline_run_state"), nullable=False),
    # The selection and settings the run was started with: what `resume` plans from again.
    sa.Column("options", JSONDocument, nullable=False),
    sa.Index("ix_pipeline_runs_pipeline", "pipeline", "id"),
)

# One row per task ever planned: its latest state and the checkpoint of its last success.
pipeline_tasks = sa.Table(
    "pipeline_tasks",
    metadata,
    sa.Column("pipeline", sa.String(200), primary_key=True),
    sa.Column("task", sa.String(500), primary_key=True),
    sa.Column("state", _state_enum(TaskState, "pipeline_task_state"), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column(
        "run_id",
        Identifier,
        sa.ForeignKey("pipeline_runs.id", ondelete="SET NULL", name="fk_pipeline_tasks_run_id"),
    ),
    sa.Column("started_at", UTCDateTime),
    sa.Column("finished_at", UTCDateTime),
    sa.Column("error", sa.Text),
    sa.Column("output_path", sa.Text),
    sa.Column("output_fingerprint", sa.String(64)),
    sa.Column("rows", sa.BigInteger),
    sa.Column("materialized_at", UTCDateTime),
    # The run that produced the current output: staleness compares these (run ids only grow).
    sa.Column("materialized_run_id", Identifier),
    sa.Index("ix_pipeline_tasks_run_id", "run_id"),
)

# Every attempt at a task, in every run: the history a restart and the concurrency checks read.
pipeline_task_runs = sa.Table(
    "pipeline_task_runs",
    metadata,
    sa.Column("id", Identifier, primary_key=True, autoincrement=True),
    sa.Column(
        "run_id",
        Identifier,
        sa.ForeignKey("pipeline_runs.id", ondelete="CASCADE", name="fk_pipeline_task_runs_run_id"),
        nullable=False,
    ),
    sa.Column("pipeline", sa.String(200), nullable=False),
    sa.Column("task", sa.String(500), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("state", _state_enum(TaskState, "pipeline_task_state"), nullable=False),
    sa.Column("started_at", UTCDateTime, nullable=False),
    sa.Column("finished_at", UTCDateTime),
    sa.Column("error", sa.Text),
    # What the attempt published: 0 is a run that found nothing (a schedule that fired before the data).
    sa.Column("rows", sa.Integer),
    # The failed attempt's traceback, bounded (migration 0010, ``vardiya.tracebacks``).
    sa.Column("traceback", sa.Text),
    sa.Index("ix_pipeline_task_runs_run_id", "run_id"),
    sa.Index("ix_pipeline_task_runs_pipeline", "pipeline", "task"),
)

# Lineage: every (stage, partition) a task read in a run, and whether the declared graph explains it.
pipeline_reads = sa.Table(
    "pipeline_reads",
    metadata,
    sa.Column(
        "run_id",
        Identifier,
        sa.ForeignKey("pipeline_runs.id", ondelete="CASCADE", name="fk_pipeline_reads_run_id"),
        primary_key=True,
    ),
    sa.Column("task", sa.String(500), primary_key=True),
    sa.Column("read_stage", sa.String(200), primary_key=True),
    sa.Column("read_partition", sa.String(200), primary_key=True),
    sa.Column("declared", sa.Boolean, nullable=False),
)



# -- invocation models ------------------------------------------------------------------------------

# The store-backed stream: an inbox of appended records, in offset (id) order per (stream, lane). A
# record leaves it when it is cut into a batch work item, which from then on owns it (payload, retries,
# dead letter), so the table holds only what waits to be consumed.
stream_records = sa.Table(
    "stream_records",
    metadata,
    sa.Column("id", Identifier, primary_key=True, autoincrement=True),
    sa.Column("stream", sa.String(200), nullable=False),
    sa.Column("lane", sa.Integer, nullable=False),
    sa.Column("key", sa.String(500)),
    sa.Column("payload", JSONDocument, nullable=False),
    sa.Column("appended_at", UTCDateTime, nullable=False),
    sa.Index("ix_stream_records_stream", "stream", "lane", "id"),
    # The ids are offsets: never reused, even once every record has been cut (SQLite would otherwise
    # hand out max(id) + 1 again, so two appends reported the same offset; migration 0009).
    sqlite_autoincrement=True,
)

# One row per lane of an ordered stream: the batch in flight (the next is cut only once it has
# finished, which keeps order per key) and how far the lane has been cut.
stream_lanes = sa.Table(
    "stream_lanes",
    metadata,
    sa.Column("stream", sa.String(200), primary_key=True),
    sa.Column("lane", sa.Integer, primary_key=True),
    sa.Column(
        "open_item",
        Identifier,
        sa.ForeignKey("work_items.id", ondelete="SET NULL", name="fk_stream_lanes_open_item"),
    ),
    sa.Column("cut_through", sa.BigInteger, nullable=False),
)

# Every handler call of an async invocation or a stream batch that the metrics count, but one: a
# successful async call, the common case, is told by its item row (``work_items.busy_ms``, as its
# history is), sparing a row with a foreign key and two indexes per call.
invocation_calls = sa.Table(
    "invocation_calls",
    metadata,
    sa.Column("id", Identifier, primary_key=True, autoincrement=True),
    sa.Column("handler", sa.String(200), nullable=False),
    sa.Column(
        "item_id",
        Identifier,
        sa.ForeignKey("work_items.id", ondelete="CASCADE", name="fk_invocation_calls_item_id"),
        nullable=False,
    ),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("started_at", UTCDateTime, nullable=False),
    sa.Column("ended_at", UTCDateTime, nullable=False),
    sa.Column("busy_ms", sa.Float, nullable=False),
    sa.Column("records", sa.Integer, nullable=False),
    sa.Column("failed", sa.Integer, nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("error", sa.Text),
    sa.Index("ix_invocation_calls_handler", "handler", "started_at"),
    sa.Index("ix_invocation_calls_item_id", "item_id"),
)


# -- services ---------------------------------------------------------------------------------------

# One row per schedule the scheduler keeps (a slot job's ticks, a pipeline trigger): how far it has
# planned. Every scheduler reads and advances the same row, so a restarted or second scheduler starts
# where the others are; what it fires is a work item keyed by the planned time, so a tick is enqueued
# once however many schedulers fire it. ``skipped`` counts the ticks the catch-up policy passed by
# (their records are the backlog's), with the span it last passed by.
schedules = sa.Table(
    "schedules",
    metadata,
    sa.Column("name", sa.String(500), primary_key=True),
    sa.Column("planned_through", UTCDateTime),
    sa.Column("fired", sa.BigInteger, nullable=False),
    sa.Column("skipped", sa.BigInteger, nullable=False),
    sa.Column("skipped_from", UTCDateTime),
    sa.Column("skipped_to", UTCDateTime),
    sa.Column("checked_at", UTCDateTime),
    sa.Column("updated_by", sa.String(200)),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

# Per slot job, handler or pipeline stage that declares an ``sla``: how many of its runs (ticks, calls,
# tasks) went over it, and the last that did (migration 0010). One row per name, counted up in place:
# what ``vardiya status`` shows and the services export as ``vardiya_sla_missed_total``.
sla_misses = sa.Table(
    "sla_misses",
    metadata,
    sa.Column("family", sa.String(16), primary_key=True),
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("missed", sa.BigInteger, nullable=False),
    sa.Column("expected_ms", sa.Float, nullable=False),
    sa.Column("last_took_ms", sa.Float, nullable=False),
    sa.Column("last_ref", sa.String(500), nullable=False),
    sa.Column("last_at", UTCDateTime, nullable=False),
)

# What is paused (migration 0011): one row per paused slot job, handler, periodic function, pipeline or
# pipeline trigger, by (kind, name). Every scheduler and worker reads it, so a pause holds for the whole
# fleet and survives restarts; resuming deletes the row.
paused = sa.Table(
    "paused",
    metadata,
    sa.Column("kind", sa.String(16), primary_key=True),
    sa.Column("name", sa.String(500), primary_key=True),
    sa.Column("paused_at", UTCDateTime, nullable=False),
    sa.Column("reason", sa.String(500)),
)

# The schedulers and workers running against this store (migration 0012): one row per process, beaten
# at the service's heartbeat interval and deleted on a clean stop. A row whose beat is older than three
# of its intervals belongs to a service that died without stopping (SIGKILL, a lost machine).
services = sa.Table(
    "services",
    metadata,
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("app", sa.String(500)),
    sa.Column("started_at", UTCDateTime, nullable=False),
    sa.Column("beat_at", UTCDateTime, nullable=False),
    sa.Column("interval_s", sa.Float, nullable=False),
    sa.Column("runs", JSONDocument, nullable=False),
)

# A token bucket per rate-limited handler (migration 0013), shared by every worker of the store: a claim
# refills it from the clock (``tokens`` grow at the handler's rate up to its burst since ``refilled_at``)
# and takes one token per item it claims, in the claim's own transaction (the row locked on PostgreSQL,
# the write transaction on SQLite), so all workers together stay within the rate.
rate_buckets = sa.Table(
    "rate_buckets",
    metadata,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("tokens", sa.Float, nullable=False),
    sa.Column("refilled_at", UTCMicros, nullable=False),
)
