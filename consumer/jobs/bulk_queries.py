"""The bulk enqueue's statements (``consumer.jobs.bulk`` runs them), built once, at import: on
PostgreSQL the rows are ``COPY``-ed into a temporary stage, then moved into ``jobs`` by one
set-based insert; SQLite has no ``COPY``, so one prepared insert runs for every row.

Two stages: an import's rows share a kind and its other fields (``JobTemplate``), so its stage
holds keys and payloads; ``enqueue_many``'s jobs each carry their own fields, in ``jobs_new``."""

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
QUIET_NOTIFY = "SET LOCAL consumer.notify TO off"
"""An import's jobs wake no listener (migration ``0013_notify_trigger``): sweeps of them started
in the importing process, batch after batch, would compete with the import itself; they start
on the import's wake-up (``consumer.jobs.wake``) or the next ``sweep`` tick."""
COPY_STAGE = "COPY jobs_stage (idempotency_key, payload) FROM STDIN"
"""The batch's rows, as ``COPY`` text, into the stage."""
_MOVE_STAGE_PARAMS = (
    bindparam("kind", type_=String()),
    bindparam("status", type_=String()),
    bindparam("priority", type_=Integer()),
    bindparam("run_at", type_=UTCDateTime()),
    bindparam("max_attempts", type_=Integer()),
    bindparam("now", type_=UTCDateTime()),
)
EPOCH = "(SELECT consumer_job_epoch())"
"""The current epoch (migration ``0016_jobs_epochs``), read once for the whole statement: as the
column's default it would be read for every row."""
KEYS_CHECKED = "SET LOCAL consumer.keys_checked TO {}"
"""Off, or on while a move that looks its keys up in the earlier epochs itself runs: the table's
trigger then stays out of the way (migration ``0016_jobs_epochs``), as it costs the database
about 9 us a row where the move's own lookup costs about 2."""


def not_in_earlier_epochs(key: str) -> str:
    """The row's key held by no earlier epoch, which no transaction inserts into any more: one
    index probe per earlier epoch. ``OFFSET 0`` keeps it a subplan run for each row; as a join
    the planner hashed every earlier epoch's keys, a cost that grows with what is retained."""
    return (
        f"NOT EXISTS (SELECT 1 FROM jobs earlier WHERE earlier.idempotency_key = {key} "
        f"AND earlier.epoch < {EPOCH} OFFSET 0)"
    )


_MOVE_STAGE = (
    "INSERT INTO jobs (kind, payload, status, priority, run_at, attempts, max_attempts, "
    "idempotency_key, created_at, updated_at, epoch) "
    "SELECT :kind, payload::json, :status, :priority, :run_at, 0, :max_attempts, "
    f"idempotency_key, :now, :now, {EPOCH} FROM jobs_stage "
    f"WHERE {not_in_earlier_epochs('jobs_stage.idempotency_key')}"
)
MOVE_STAGE = text(f"{_MOVE_STAGE} ON CONFLICT DO NOTHING").bindparams(*_MOVE_STAGE_PARAMS)
"""The stage's rows into ``jobs``, in stage order; an existing key (or one repeated in the stage)
is skipped, not an error."""
INSERT_STAGE = text(_MOVE_STAGE).bindparams(*_MOVE_STAGE_PARAMS)
"""``MOVE_STAGE`` without ``ON CONFLICT``, tried first under a savepoint: a batch whose keys are
all new (an import's, almost always) is stored for about two thirds of the database's CPU, as
the speculative insertion ``ON CONFLICT`` makes of every row (a lock, a second WAL record) is
not needed. A taken key fails it whole, and ``MOVE_STAGE`` then runs over the same stage."""

NEW_JOB_STAGE = {
    "kind": ("text", "kind"),
    "payload": ("text", "payload::json"),
    "priority": ("int", "priority"),
    "run_at": ("timestamptz", "COALESCE(run_at, :now)"),
    "max_attempts": ("int", "max_attempts"),
    "idempotency_key": ("text", "idempotency_key"),
    "lock_key": ("text", "lock_key"),
    "group_key": ("text", "group_key"),
}
"""The ``jobs`` columns each job of ``enqueue_many`` sets for itself: the stage's column type and
what is moved into ``jobs`` (``bulk.new_job_fields`` gives the values, in this order)."""
CREATE_NEW_STAGE = (
    "CREATE TEMPORARY TABLE IF NOT EXISTS jobs_new (line int, "
    + ", ".join(f"{name} {kind}" for name, (kind, _) in NEW_JOB_STAGE.items())
    + ") ON COMMIT DELETE ROWS"
)
"""Per session, emptied by every commit, as ``jobs_stage``. ``line``: the job's place in the
call, so ids follow the caller's order (a lock key's jobs run in id order)."""
COPY_NEW_STAGE = f"COPY jobs_new (line, {', '.join(NEW_JOB_STAGE)}) FROM STDIN"
MOVE_NEW_STAGE = text(
    "WITH staged AS (DELETE FROM jobs_new RETURNING *) "
    "INSERT INTO jobs (status, attempts, created_at, updated_at, trace_parent, epoch, "
    + ", ".join(NEW_JOB_STAGE)
    + f") SELECT :status, 0, :now, :now, :trace_parent, {EPOCH}, "
    + ", ".join(moved for _, moved in NEW_JOB_STAGE.values())
    + f" FROM staged WHERE {not_in_earlier_epochs('staged.idempotency_key')}"
    + " ORDER BY line ON CONFLICT DO NOTHING"
).bindparams(
    bindparam("status", type_=String()),
    bindparam("now", type_=UTCDateTime()),
    bindparam("trace_parent", type_=String()),
)
"""The stage's jobs into ``jobs`` in the caller's order: a key already taken, or taken by an
earlier job of the call, is skipped (the first one wins), not an error. The stage is emptied by
the same statement: a second call in the same transaction must not move the first's jobs again."""

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
