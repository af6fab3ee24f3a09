"""The ``jobs`` table and the flow-control table ``job_flow``, on the shared ``metadata``.
Migrations: ``0002_jobs``, then ``0006_job_flow`` (``jobs.lock_key`` and ``job_flow``), then
``0008_job_flow_shards``; ``job_kinds`` for SQL producers: ``0010_sql_enqueue``; a running job's
cancel request and a target's reported result: ``0011_running_cancel``; groups
(``jobs.group_key``, ``jobs.fair_at``, ``job_group_flow``): ``0012_job_groups``. On PostgreSQL
the table is partitioned by epoch (``0016_jobs_epochs``; retention: ``consumer.jobs.epochs``)."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Index,
    Integer,
    String,
    Table,
    Text,
    func,
    literal_column,
    text,
)  # fmt: skip

from consumer.db.dialect import POSTGRESQL
from consumer.db.schema import metadata
from consumer.db.types import UTCDateTime

# SQLite only auto-increments an INTEGER primary key; BIGINT stays BIGINT on PostgreSQL.
JobId = BigInteger().with_variant(Integer(), "sqlite")
PENDING = text("status = 'pending'")
RUNNING = text("status = 'running'")
FINISHED = text("finished_at IS NOT NULL")
TRACE_COMMENT = "W3C traceparent of the span that enqueued the job (migration 0007_job_trace)"
UNFINISHED_KEYED = text("lock_key IS NOT NULL AND status IN ('pending', 'running')")
RUNNING_KEYED = text("lock_key IS NOT NULL AND status = 'running'")
LOCK_KEY_COMMENT = "jobs sharing it run one at a time, in id order"
GROUP_COMMENT = "jobs of different groups take turns in the claim; NULL: no group"
TURN_COMMENT = "a grouped job's turn, set on insert (trigger jobs_group_turn); NULL: run_at"
UNFINISHED_GROUPED = text("group_key IS NOT NULL AND status IN ('pending', 'running')")
PENDING_GROUPED = text("group_key IS NOT NULL AND status = 'pending'")
KIND_FIELDS_COMMENT = "what SQL producers may set in the payload; NULL: every field"
CANCEL_COMMENT = "an operator asked to cancel the running job; it ends cancelled"
RESULT_COMMENT = "the result object a target reported with its completion"
FLOW_LIMITS_COMMENT = "an operator's change (cap:N;rate:N/1s); NULL: as configured"

jobs = Table(
    "jobs",
    metadata,
    Column("id", JobId, primary_key=True, autoincrement=True),
    Column("kind", String(100), nullable=False, comment="job kind, looked up in the kind registry"),
    Column("payload", JSON, nullable=False),
    Column("status", String(16), nullable=False, comment="pending running done dead cancelled"),
    Column("priority", Integer, nullable=False, comment="higher runs first"),
    Column("run_at", UTCDateTime, nullable=False, comment="not claimed before this time"),
    Column("attempts", Integer, nullable=False, comment="claims so far, takeovers included"),
    Column("max_attempts", Integer, nullable=True, comment="NULL: the sweep's default"),
    Column("lease_until", UTCDateTime, nullable=True),
    Column("claimed_by", String(64), nullable=True, comment="token of the current claim"),
    Column("last_error", Text, nullable=True),
    Column("errors", JSON, nullable=True, comment="error history: [{attempt, at, error}]"),
    Column("idempotency_key", Text, nullable=True, comment="unique among retained jobs"),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime, nullable=True),
    Column("trace_parent", String(55), nullable=True, comment=TRACE_COMMENT),
    Column("lock_key", Text, nullable=True, comment=LOCK_KEY_COMMENT),
    Column("group_key", Text, nullable=True, comment=GROUP_COMMENT),
    Column("fair_at", UTCDateTime, nullable=True, comment=TURN_COMMENT),
    Column("debounce_key", Text, nullable=True, comment="enqueues with it, pending, are one job"),
    Column("debounce_until", UTCDateTime, nullable=True, comment="a debounced job's latest run"),
    Column("cancel_requested_at", UTCDateTime, nullable=True, comment=CANCEL_COMMENT),
    Column("result", JSON, nullable=True, comment=RESULT_COMMENT),
    # The autoincrement keyword stops SQLite from reusing the id of a purged newest row, so a
    # Message-ID derived from the id is never reused either.
    sqlite_autoincrement=True,
)

EPOCH_PARTITIONS = re.compile(r"jobs_e\d+(_.*)?|job_epochs(_.*)?")
"""The epochs' partitions (and their indexes) and ``job_epochs``, on PostgreSQL."""
EPOCH_PARTITIONING = re.compile(rf"{EPOCH_PARTITIONS.pattern}|jobs_ids")
"""The tables and indexes PostgreSQL's jobs table by epoch adds beside this model (migration
``0016_jobs_epochs``): the partitions and their indexes, ``job_epochs``, and the unique index on
``(id, epoch)`` that stands for the primary key."""
EPOCH_KEYED = frozenset({"jobs_idempotency_key", "jobs_debounce_pending", "jobs_lock_key_running"})
"""The unique indexes that on PostgreSQL carry the epoch after the model's columns."""


def epoch_column(dialect: str) -> list[Any]:
    """PostgreSQL's ``jobs.epoch``, the partition key (migration ``0016_jobs_epochs``), which
    every unique index there carries; SQLite has no such column. Not in the table above: every
    insert takes its default, the current epoch."""
    return [literal_column("epoch")] if dialect == POSTGRESQL else []


Index("jobs_idempotency_key", jobs.c.idempotency_key, unique=True)
# Partial indexes keep the claimable set small however many finished jobs are retained.
TURN = func.coalesce(jobs.c.fair_at, jobs.c.run_at)
"""A job's place in the claim's order after its priority: a grouped job's turn, else its
``run_at`` (``consumer.jobs.queries.claim``)."""
Index(
    "jobs_claimable",
    jobs.c.priority.desc(),
    TURN,
    jobs.c.id,
    postgresql_where=PENDING,
    sqlite_where=PENDING,
)
# A group's last turn and the earliest pending turn: what the insert trigger reads.
Index(
    "jobs_group_turns",
    jobs.c.group_key,
    jobs.c.fair_at,
    postgresql_where=UNFINISHED_GROUPED,
    sqlite_where=UNFINISHED_GROUPED,
)
Index(
    "jobs_group_head",
    jobs.c.fair_at,
    postgresql_where=PENDING_GROUPED,
    sqlite_where=PENDING_GROUPED,
)
# One pending job per debounce key: the database folds a burst of enqueues into it.
PENDING_DEBOUNCED = text("debounce_key IS NOT NULL AND status = 'pending'")
Index(
    "jobs_debounce_pending",
    jobs.c.debounce_key,
    unique=True,
    postgresql_where=PENDING_DEBOUNCED,
    sqlite_where=PENDING_DEBOUNCED,
)
Index("jobs_leases", jobs.c.lease_until, postgresql_where=RUNNING, sqlite_where=RUNNING)
Index("jobs_finished", jobs.c.finished_at, postgresql_where=FINISHED, sqlite_where=FINISHED)
# A lock key's queue, head first (the claim takes a key's lowest unfinished id only), and one
# running job per key at most: the database refuses a second even if a claim were wrong.
Index(
    "jobs_lock_key_queue",
    jobs.c.lock_key,
    jobs.c.id,
    postgresql_where=UNFINISHED_KEYED,
    sqlite_where=UNFINISHED_KEYED,
)
Index(
    "jobs_lock_key_running",
    jobs.c.lock_key,
    unique=True,
    postgresql_where=RUNNING_KEYED,
    sqlite_where=RUNNING_KEYED,
)

job_flow = Table(
    "job_flow",
    metadata,
    Column("kind", String(100), primary_key=True),
    Column("limits", String(200), nullable=True, comment=FLOW_LIMITS_COMMENT),
    Column("tat", UTCDateTime, nullable=True, comment="the rate's theoretical arrival time"),
    Column("updated_by", String(200), nullable=True),
    Column("updated_at", UTCDateTime, nullable=False),
)
"""One row per limited kind: claims of a rate-limited kind lock it (``FOR UPDATE``), so they run
one at a time and each sees the rate state the one before it left."""

job_flow_shard = Table(
    "job_flow_shard",
    metadata,
    Column("kind", String(100), primary_key=True),
    Column("shard", Integer, primary_key=True, autoincrement=False),
)
"""``consumer.jobs.flow.SHARDS`` rows per capped kind (migration ``0008_job_flow_shards``): a
claim of the kind locks one of them, or all of them near the cap (``consumer.jobs.flow_lock``)."""

job_kinds = Table(
    "job_kinds",
    metadata,
    Column("kind", String(100), primary_key=True),
    Column("producer_fields", JSON, nullable=True, comment=KIND_FIELDS_COMMENT),
    Column("max_payload_bytes", Integer, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("group_field", String(200), nullable=True, comment="the payload field that groups"),
)
"""The kinds the serving processes run, each written at start-up (``consumer.jobs.listen``), so
the SQL function ``consumer_enqueue`` (migration ``0010_sql_enqueue``) can refuse an unknown
kind and apply the kind's producer fields and payload limit without knowing Python."""

job_group_flow = Table(
    "job_group_flow",
    metadata,
    Column("kind", String(100), primary_key=True),
    Column("group_key", Text, primary_key=True),
    Column("tat", UTCDateTime, nullable=True, comment="the group rate's theoretical arrival time"),
)
"""One row per group of a kind with a group cap or rate, made by its first claim: claims that
took jobs of a group lock its row, so they count the group's running jobs one at a time
(``consumer.jobs.groups``)."""
