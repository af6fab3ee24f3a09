"""The bulk enqueue's statements (``consumer.jobs.bulk`` runs them), built once, at import: on
PostgreSQL the rows are ``COPY``-ed into a temporary stage, then moved into ``jobs`` by one
set-based insert; SQLite has no ``COPY``, so one prepared insert runs for every row."""

from __future__ import annotations

from sqlalchemy import Integer, String, Text, bindparam, text

from consumer.db import dialect as sql
from consumer.db.types import UTCDateTime
from consumer.jobs.schema import jobs

CREATE_STAGE = (
    "CREATE TEMPORARY TABLE IF NOT EXISTS jobs_stage "
    "(idempotency_key text, payload text) ON COMMIT DELETE ROWS"
)
"""Per session; emptied by every commit, so a pooled connection reuses it clean."""
RELAX_COMMIT = "SET LOCAL synchronous_commit TO OFF"
"""For a caller whose later commit is synchronous: PostgreSQL writes WAL in order, so that commit
makes this one durable too; a crash before it loses this transaction whole (jobs and the progress
they represent together), and the work is redone from the previous commit."""
COPY_STAGE = "COPY jobs_stage (idempotency_key, payload) FROM STDIN"
"""The batch's rows, as ``COPY`` text, into the stage."""
MOVE_STAGE = text(
    "INSERT INTO jobs (kind, payload, status, priority, run_at, attempts, max_attempts, "
    "idempotency_key, created_at, updated_at) "
    "SELECT :kind, payload::json, :status, :priority, :run_at, 0, :max_attempts, "
    "idempotency_key, :now, :now FROM jobs_stage "
    "ON CONFLICT DO NOTHING"
).bindparams(
    bindparam("kind", type_=String()),
    bindparam("status", type_=String()),
    bindparam("priority", type_=Integer()),
    bindparam("run_at", type_=UTCDateTime()),
    bindparam("max_attempts", type_=Integer()),
    bindparam("now", type_=UTCDateTime()),
)
"""The stage's rows into ``jobs``, in stage order; an existing key (or one repeated in the stage)
is skipped, not an error."""

# SQLite has no COPY: one prepared statement, run for every row.

INSERT_ONE = sql.insert_ignore(jobs, "sqlite").values(
    kind=bindparam("kind", type_=String()),
    payload=bindparam("payload", type_=Text()),  # already JSON text: stored as is
    status=bindparam("status", type_=String()),
    priority=bindparam("priority", type_=Integer()),
    run_at=bindparam("run_at", type_=UTCDateTime()),
    attempts=0,
    max_attempts=bindparam("max_attempts", type_=Integer()),
    idempotency_key=bindparam("idempotency_key", type_=Text()),
    created_at=bindparam("now", type_=UTCDateTime()),
    updated_at=bindparam("now", type_=UTCDateTime()),
)
"""One row of a batch as a pending job; a taken key is skipped (an executemany counts the rest)."""
