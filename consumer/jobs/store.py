"""Every SQL statement on the ``jobs`` table, each named once.

The claim differs by dialect (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, a guarded ``UPDATE``
under SQLite's single writer); every write after it is guarded by ``claimed_by`` and
``status = 'running'``: zero rows means the lease was lost, and nothing is overwritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, select
from sqlalchemy.dialects import postgresql, sqlite

from consumer.db.engine import unavailable_on_db_fault
from consumer.jobs.model import EnqueueResult, NewJob, Status
from consumer.jobs.schema import jobs
from consumer.timeutil import utcnow


def _insert(connection: Connection) -> Any:
    return (postgresql if connection.dialect.name == "postgresql" else sqlite).insert(jobs)


def _row(job: NewJob, now: datetime) -> dict[str, Any]:
    return {
        "kind": job.kind, "payload": job.payload, "status": Status.PENDING.value,
        "priority": job.priority, "run_at": job.run_at or now, "attempts": 0,
        "max_attempts": job.max_attempts, "idempotency_key": job.key,
        "created_at": now, "updated_at": now,
    }  # fmt: skip


def enqueue(
    engine: Engine,
    kind: str,
    payload: Any,
    *,
    key: str | None = None,
    run_at: datetime | None = None,
    priority: int = 0,
    max_attempts: int | None = None,
) -> EnqueueResult:
    """Insert one pending job in its own transaction. A job with the same idempotency key
    (unfinished or finished, until purged) is reported, never inserted twice: the unique
    index decides, so concurrent callers cannot both win."""
    job = NewJob(kind, payload, key, run_at, priority, max_attempts)
    with unavailable_on_db_fault(), engine.begin() as connection:
        statement = _insert(connection).values(_row(job, utcnow()))
        inserted = connection.execute(
            statement.on_conflict_do_nothing().returning(jobs.c.id)
        ).scalar()
        if inserted is not None:
            return EnqueueResult(int(inserted), inserted=True)
        existing = connection.execute(
            select(jobs.c.id).where(jobs.c.idempotency_key == key)
        ).scalar()
    return EnqueueResult(None if existing is None else int(existing), inserted=False)


def enqueue_many(connection: Connection, new_jobs: Iterable[NewJob]) -> int:
    """Bulk-insert within the caller's transaction; rows whose key already exists (among
    unfinished or finished jobs, or earlier in ``new_jobs``) are skipped. Returns how many
    were inserted."""
    now = utcnow()
    rows = [_row(job, now) for job in new_jobs]
    if not rows:
        return 0
    statement = _insert(connection).on_conflict_do_nothing().returning(jobs.c.id)
    with unavailable_on_db_fault():
        return len(connection.execute(statement, rows).all())


def get(engine: Engine, job_id: int) -> Mapping[str, Any] | None:
    with unavailable_on_db_fault(), engine.connect() as connection:
        row = connection.execute(select(jobs).where(jobs.c.id == job_id)).first()
    return None if row is None else dict(row._mapping)
