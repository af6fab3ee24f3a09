"""Every SQL statement on the ``jobs`` table, each named once.

The claim differs by dialect (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, a guarded ``UPDATE``
under SQLite's single writer); every write after it is guarded by ``claimed_by`` and
``status = 'running'``: zero rows means the lease was lost, and nothing is overwritten.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Select,
    Update,
    and_,
    bindparam,
    delete,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from consumer.db.engine import unavailable_on_db_fault
from consumer.jobs.model import FINISHED, EnqueueResult, Job, NewJob, Status
from consumer.jobs.schema import jobs
from consumer.timeutil import utcnow

CLAIMED = (
    jobs.c.id,
    jobs.c.kind,
    jobs.c.payload,
    jobs.c.status,
    jobs.c.priority,
    jobs.c.run_at,
    jobs.c.attempts,
    jobs.c.max_attempts,
    jobs.c.idempotency_key,
    jobs.c.created_at,
    jobs.c.errors,
    jobs.c.lease_until,
)


def _insert(connection: Connection) -> Any:
    return (postgresql if connection.dialect.name == "postgresql" else sqlite).insert(jobs)


def _row(job: NewJob, now: datetime) -> dict[str, Any]:
    return {
        "kind": job.kind,
        "payload": job.payload,
        "status": Status.PENDING.value,
        "priority": job.priority,
        "run_at": job.run_at or now,
        "attempts": 0,
        "max_attempts": job.max_attempts,
        "idempotency_key": job.key,
        "created_at": now,
        "updated_at": now,
    }


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


# --- the sweep: claim, then guarded writes -------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """A failed run to record: back to ``pending`` at ``run_at``, or ``dead``."""

    job_id: int
    dead: bool
    run_at: datetime
    error: str
    errors: list[dict[str, Any]]


@dataclass(frozen=True)
class Written:
    """What the guarded writes changed; a job missing from them had lost its lease."""

    done: int
    retried: int
    dead: int
    released: int

    @property
    def total(self) -> int:
        return self.done + self.retried + self.dead + self.released


def claim(
    engine: Engine,
    token: str,
    limit: int,
    kinds: Collection[str],
    now: datetime,
    lease_until: datetime,
) -> list[Job]:
    """Claim up to ``limit`` jobs of ``kinds`` in one statement: leases that expired first
    (their sweeper died), then due pending jobs by priority and age."""
    build = _claim_postgresql if engine.dialect.name == "postgresql" else _claim_sqlite
    statement = build(limit, list(kinds), now).values(
        status=Status.RUNNING.value,
        attempts=jobs.c.attempts + 1,
        lease_until=lease_until,
        claimed_by=token,
        updated_at=now,
    )
    with unavailable_on_db_fault(), engine.begin() as connection:
        rows = connection.execute(statement.returning(*CLAIMED)).all()
    claimed = [Job.from_row(row) for row in rows]
    return sorted(claimed, key=lambda job: (-job.priority, job.run_at, job.id))


def _expired(kinds: list[str], now: datetime) -> Select[Any]:
    return select(jobs.c.id).where(
        jobs.c.status == Status.RUNNING.value, jobs.c.lease_until < now, jobs.c.kind.in_(kinds)
    )


def _due(kinds: list[str], now: datetime) -> Select[Any]:
    return (
        select(jobs.c.id)
        .where(jobs.c.status == Status.PENDING.value, jobs.c.run_at <= now, jobs.c.kind.in_(kinds))
        .order_by(jobs.c.priority.desc(), jobs.c.run_at, jobs.c.id)
    )


def _claimable(now: datetime) -> Any:
    """Re-checked in the UPDATE itself, so a claim never takes a row another claim took."""
    return or_(
        jobs.c.status == Status.PENDING.value,
        and_(jobs.c.status == Status.RUNNING.value, jobs.c.lease_until < now),
    )


def _claim_postgresql(limit: int, kinds: list[str], now: datetime) -> Update:
    """Materialized CTEs lock their rows with SKIP LOCKED: concurrent sweepers take disjoint
    batches without waiting. The union is read lazily, so at most ``limit`` rows are locked."""
    expired, due = (
        query.limit(limit).with_for_update(skip_locked=True).cte(name).prefix_with("MATERIALIZED")
        for name, query in (("expired", _expired(kinds, now)), ("due", _due(kinds, now)))
    )
    picked = select(expired.c.id).union_all(select(due.c.id)).limit(limit).cte("picked")
    return update(jobs).where(jobs.c.id == picked.c.id, _claimable(now))


def _claim_sqlite(limit: int, kinds: list[str], now: datetime) -> Update:
    """SQLite has one writer (the engine begins IMMEDIATE): select and update are atomic."""
    expired = _expired(kinds, now).limit(limit).subquery()
    due = _due(kinds, now).limit(limit).subquery()
    picked = select(expired.c.id).union_all(select(due.c.id)).limit(limit)
    return update(jobs).where(jobs.c.id.in_(picked), _claimable(now))


def _owned(token: str) -> Any:
    return and_(jobs.c.claimed_by == token, jobs.c.status == Status.RUNNING.value)


def complete(
    engine: Engine,
    token: str,
    now: datetime,
    done: Sequence[int] = (),
    failures: Sequence[Failure] = (),
    released: Sequence[int] = (),
) -> Written:
    """Record a batch in one transaction, every write guarded by the claim's token."""
    with unavailable_on_db_fault(), engine.begin() as connection:
        done_count = _mark_done(connection, token, now, done)
        retried = _record_failures(connection, token, now, [f for f in failures if not f.dead])
        dead = _record_failures(connection, token, now, [f for f in failures if f.dead])
        released_count = _release(connection, token, now, released)
    return Written(done_count, retried, dead, released_count)


def _mark_done(connection: Connection, token: str, now: datetime, ids: Sequence[int]) -> int:
    if not ids:
        return 0
    statement = (
        update(jobs)
        .where(jobs.c.id.in_(ids), _owned(token))
        .values(status=Status.DONE.value, lease_until=None, updated_at=now, finished_at=now)
    )
    return connection.execute(statement).rowcount


def _record_failures(
    connection: Connection, token: str, now: datetime, failures: Sequence[Failure]
) -> int:
    if not failures:
        return 0
    statement = (
        update(jobs)
        .where(jobs.c.id == bindparam("job_id"), _owned(token))
        .values(
            status=bindparam("new_status"),
            run_at=bindparam("new_run_at"),
            last_error=bindparam("error"),
            errors=bindparam("history", type_=jobs.c.errors.type),
            finished_at=bindparam("new_finished_at", type_=jobs.c.finished_at.type),
            lease_until=None,
            updated_at=now,
        )
    )
    changed = 0
    for failure in failures:
        changed += connection.execute(
            statement,
            {
                "job_id": failure.job_id,
                "error": failure.error,
                "history": failure.errors,
                "new_status": (Status.DEAD if failure.dead else Status.PENDING).value,
                "new_run_at": failure.run_at,
                "new_finished_at": now if failure.dead else None,
            },
        ).rowcount
    return changed


def _release(connection: Connection, token: str, now: datetime, ids: Sequence[int]) -> int:
    """Give back jobs the sweep claimed but had no time to run; the claim is not an attempt."""
    if not ids:
        return 0
    statement = (
        update(jobs)
        .where(jobs.c.id.in_(ids), _owned(token))
        .values(
            status=Status.PENDING.value,
            attempts=jobs.c.attempts - 1,
            lease_until=None,
            claimed_by=None,
            updated_at=now,
        )
    )
    return connection.execute(statement).rowcount


def count_due(engine: Engine, now: datetime) -> int:
    """Pending jobs whose time has come (whatever their kind), plus expired leases."""
    query = select(func.count()).where(
        or_(
            and_(jobs.c.status == Status.PENDING.value, jobs.c.run_at <= now),
            and_(jobs.c.status == Status.RUNNING.value, jobs.c.lease_until < now),
        )
    )
    with unavailable_on_db_fault(), engine.connect() as connection:
        return int(connection.execute(query).scalar_one())


# --- operations: inspect, retry, cancel, purge ----------------------------------------------------


def get(engine: Engine, job_id: int) -> Job | None:
    with unavailable_on_db_fault(), engine.connect() as connection:
        row = connection.execute(select(jobs).where(jobs.c.id == job_id)).first()
    return None if row is None else Job.from_row(row)


def list_jobs(
    engine: Engine, status: Status | None = None, kind: str | None = None, limit: int = 50
) -> list[Job]:
    """Newest first."""
    query = select(jobs).order_by(jobs.c.id.desc()).limit(limit)
    if status is not None:
        query = query.where(jobs.c.status == status.value)
    if kind is not None:
        query = query.where(jobs.c.kind == kind)
    with unavailable_on_db_fault(), engine.connect() as connection:
        return [Job.from_row(row) for row in connection.execute(query)]


def retry(engine: Engine, now: datetime, job_id: int | None = None) -> int:
    """Make one dead or cancelled job (or, with no id, every dead job) pending again with fresh
    attempts; the error history is kept."""
    statement = update(jobs).values(
        status=Status.PENDING.value,
        attempts=0,
        run_at=now,
        lease_until=None,
        claimed_by=None,
        updated_at=now,
        finished_at=None,
    )
    if job_id is None:
        statement = statement.where(jobs.c.status == Status.DEAD.value)
    else:
        retriable = [Status.DEAD.value, Status.CANCELLED.value]
        statement = statement.where(jobs.c.id == job_id, jobs.c.status.in_(retriable))
    with unavailable_on_db_fault(), engine.begin() as connection:
        return connection.execute(statement).rowcount


def cancel(engine: Engine, job_id: int, now: datetime) -> bool:
    """Cancel a pending job. A running one cannot be stopped mid-effect; cancel it after."""
    statement = (
        update(jobs)
        .where(jobs.c.id == job_id, jobs.c.status == Status.PENDING.value)
        .values(status=Status.CANCELLED.value, updated_at=now, finished_at=now)
    )
    with unavailable_on_db_fault(), engine.begin() as connection:
        return connection.execute(statement).rowcount == 1


def purge(engine: Engine, finished_before: datetime) -> int:
    """Delete finished jobs past the retention, which frees their idempotency keys."""
    statement = delete(jobs).where(
        jobs.c.finished_at < finished_before, jobs.c.status.in_([s.value for s in FINISHED])
    )
    with unavailable_on_db_fault(), engine.begin() as connection:
        return connection.execute(statement).rowcount
