"""Every SQL statement on the ``jobs`` table, each named once.

The claim differs by dialect (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, a guarded ``UPDATE``
under SQLite's single writer); every write after it is guarded by ``claimed_by`` and
``status = 'running'``: zero rows means the lease was lost, and nothing is overwritten.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    Engine,
    Integer,
    Select,
    String,
    Text,
    and_,
    any_,
    bindparam,
    delete,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from consumer.db.engine import unavailable_on_db_fault
from consumer.db.types import UTCDateTime
from consumer.jobs.kinds import known_kinds
from consumer.jobs.model import (
    FINISHED,
    EnqueueResult,
    Failure,
    Job,
    NewJob,
    Status,
    UnknownKind,
    Written,
)
from consumer.jobs.schema import JobId, jobs
from consumer.timeutil import utcnow

CLAIMED = (
    jobs.c.id, jobs.c.kind, jobs.c.payload, jobs.c.priority, jobs.c.run_at, jobs.c.attempts,
    jobs.c.max_attempts, jobs.c.idempotency_key, jobs.c.created_at, jobs.c.errors,
)  # fmt: skip
"""What a claim returns, in ``Job.from_claim`` order."""


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
    allow_unknown: bool = False,
) -> EnqueueResult:
    """Insert one pending job in its own transaction. A job with the same idempotency key
    (unfinished or finished, until purged) is reported, never inserted twice: the unique
    index decides, so concurrent callers cannot both win. A kind no registered plugin
    provides is refused (``UnknownKind``) unless ``allow_unknown``."""
    job = NewJob(kind, payload, key, run_at, priority, max_attempts)
    check_kinds([job], allow_unknown)
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


def enqueue_many(
    connection: Connection, new_jobs: Iterable[NewJob], *, allow_unknown: bool = False
) -> int:
    """Bulk-insert within the caller's transaction; rows whose key already exists (among
    unfinished or finished jobs, or earlier in ``new_jobs``) are skipped. Returns how many
    were inserted. Any kind no registered plugin provides refuses the whole call
    (``UnknownKind``, nothing inserted) unless ``allow_unknown``."""
    new_jobs = list(new_jobs)
    check_kinds(new_jobs, allow_unknown)
    now = utcnow()
    rows = [_row(job, now) for job in new_jobs]
    if not rows:
        return 0
    statement = _insert(connection).on_conflict_do_nothing().returning(jobs.c.id)
    with unavailable_on_db_fault():
        return len(connection.execute(statement, rows).all())


def check_kinds(new_jobs: Iterable[NewJob], allow_unknown: bool) -> None:
    """Refuse jobs that no sweeper would ever run: they would wait, due, forever."""
    if allow_unknown:
        return
    known = known_kinds()
    unknown = {job.kind for job in new_jobs} - known
    if unknown:
        raise UnknownKind(unknown, known)


# --- the sweep: claim, then guarded writes -------------------------------------------------------


# Statements are built once per dialect, with bind parameters: SQLAlchemy reuses their cache keys
# and compiled forms, and psycopg prepares them server-side after a few runs.
NOW = bindparam("now", type_=UTCDateTime())
TOKEN = bindparam("token", type_=String())
LIMIT = bindparam("limit", type_=Integer())
OWNED = and_(jobs.c.claimed_by == TOKEN, jobs.c.status == Status.RUNNING.value)


def _among(column: Any, name: str, dialect: str) -> Any:
    """``column = ANY(:name)`` with one array parameter on PostgreSQL (one statement text,
    whatever the batch size); an expanded ``IN`` list on SQLite."""
    if dialect == "postgresql":
        element = BigInteger() if column is jobs.c.id else column.type
        return column == any_(bindparam(name, type_=postgresql.ARRAY(element)))
    return column.in_(bindparam(name, expanding=True))


def claim(
    connection: Connection,
    token: str,
    limit: int,
    kinds: Collection[str],
    now: datetime,
    lease_until: datetime,
) -> list[Job]:
    """Claim up to ``limit`` jobs of ``kinds`` in one statement, in the caller's transaction:
    leases that expired first (their sweeper died), then due pending jobs by priority and age."""
    statement = _claim_statement(connection.dialect.name)
    params = {
        "token": token,
        "limit": limit,
        "kinds": list(kinds),
        "now": now,
        "lease": lease_until,
    }
    claimed = [Job.from_claim(row) for row in connection.execute(statement, params).all()]
    return sorted(claimed, key=lambda job: (-job.priority, job.run_at, job.id))


@cache
def _claim_statement(dialect: str) -> Any:
    expired, due = _candidates(dialect)
    picked = (_picked_postgresql if dialect == "postgresql" else _picked_sqlite)(expired, due)
    claimable = or_(  # re-checked in the UPDATE itself: a row another claim took is left alone
        jobs.c.status == Status.PENDING.value,
        and_(jobs.c.status == Status.RUNNING.value, jobs.c.lease_until < NOW),
    )
    lease = bindparam("lease", type_=UTCDateTime())
    return (
        update(jobs)
        .where(picked, claimable)
        .values(
            status=Status.RUNNING.value, attempts=jobs.c.attempts + 1, claimed_by=TOKEN,
            lease_until=lease, updated_at=NOW,
        )
        .returning(*CLAIMED)
    )  # fmt: skip


def _candidates(dialect: str) -> tuple[Select[Any], Select[Any]]:
    """Running jobs whose lease expired (their sweeper died), and due pending jobs in order."""
    kind = _among(jobs.c.kind, "kinds", dialect)
    expired = select(jobs.c.id).where(
        jobs.c.status == Status.RUNNING.value, jobs.c.lease_until < NOW, kind
    )
    due = (
        select(jobs.c.id)
        .where(jobs.c.status == Status.PENDING.value, jobs.c.run_at <= NOW, kind)
        .order_by(jobs.c.priority.desc(), jobs.c.run_at, jobs.c.id)
    )
    return expired, due


def _picked_postgresql(expired: Select[Any], due: Select[Any]) -> Any:
    """Materialized CTEs lock their rows with SKIP LOCKED: concurrent sweepers take disjoint
    batches without waiting. The union is read lazily, so at most ``limit`` rows are locked."""
    expired_cte, due_cte = (
        query.limit(LIMIT).with_for_update(skip_locked=True).cte(name).prefix_with("MATERIALIZED")
        for name, query in (("expired", expired), ("due", due))
    )
    picked = select(expired_cte.c.id).union_all(select(due_cte.c.id)).limit(LIMIT).cte("picked")
    return jobs.c.id == picked.c.id


def _picked_sqlite(expired: Select[Any], due: Select[Any]) -> Any:
    """SQLite has one writer (the engine begins IMMEDIATE): select and update are atomic."""
    first, then = expired.limit(LIMIT).subquery(), due.limit(LIMIT).subquery()
    return jobs.c.id.in_(select(first.c.id).union_all(select(then.c.id)).limit(LIMIT))


@cache
def _done_statement(dialect: str) -> Any:
    return (
        update(jobs)
        .where(_among(jobs.c.id, "ids", dialect), OWNED)
        .values(status=Status.DONE.value, lease_until=None, updated_at=NOW, finished_at=NOW)
    )


@cache
def _released_statement(dialect: str) -> Any:
    """Claimed but not run for lack of time: the claim was not an attempt."""
    return (
        update(jobs)
        .where(_among(jobs.c.id, "ids", dialect), OWNED)
        .values(
            status=Status.PENDING.value, attempts=jobs.c.attempts - 1, lease_until=None,
            claimed_by=None, updated_at=NOW,
        )
    )  # fmt: skip


@cache
def _renew_statement() -> Any:
    """Push a live sweeper's lease forward: only rows it still owns (a taken-over job stays
    with its new owner)."""
    lease = bindparam("lease", type_=UTCDateTime())
    return update(jobs).where(OWNED).values(lease_until=lease)


def renew(connection: Connection, token: str, lease_until: datetime) -> int:
    """Extend the lease of every job ``token`` still holds, in the caller's transaction."""
    return connection.execute(_renew_statement(), {"token": token, "lease": lease_until}).rowcount


FAILED = (
    update(jobs)
    .where(jobs.c.id == bindparam("job_id", type_=JobId), OWNED)
    .values(
        status=bindparam("new_status", type_=String()),
        run_at=bindparam("new_run_at", type_=UTCDateTime()),
        last_error=bindparam("error", type_=Text()),
        errors=bindparam("history", type_=jobs.c.errors.type),
        finished_at=bindparam("new_finished_at", type_=UTCDateTime()),
        lease_until=None,
        updated_at=NOW,
    )
)


def complete(
    connection: Connection,
    token: str,
    now: datetime,
    done: Sequence[int] = (),
    failures: Sequence[Failure] = (),
    released: Sequence[int] = (),
) -> Written:
    """Record a batch in the caller's transaction, every write guarded by the claim's token."""
    base = {"token": token, "now": now}
    dialect = connection.dialect.name
    done_count = _for_ids(connection, _done_statement(dialect), base, done)
    counts = {True: 0, False: 0}
    for failure in failures:
        params = {**base, **_failure(failure, now)}
        counts[failure.dead] += connection.execute(FAILED, params).rowcount
    released_count = _for_ids(connection, _released_statement(dialect), base, released)
    return Written(done_count, counts[False], counts[True], released_count)


def _for_ids(
    connection: Connection, statement: Any, base: dict[str, Any], ids: Sequence[int]
) -> int:
    return connection.execute(statement, {**base, "ids": list(ids)}).rowcount if ids else 0


def _failure(failure: Failure, now: datetime) -> dict[str, Any]:
    return {
        "job_id": failure.job_id, "error": failure.error, "history": failure.errors,
        "new_status": (Status.DEAD if failure.dead else Status.PENDING).value,
        "new_run_at": failure.run_at, "new_finished_at": now if failure.dead else None,
    }  # fmt: skip


def due_by_kind(connection: Connection, now: datetime) -> dict[str, int]:
    """Pending jobs whose time has come, plus expired leases, counted by kind (whatever the
    kind: a sweep reports the due jobs it has no kind for)."""
    query = (
        select(jobs.c.kind, func.count())
        .where(
            or_(
                and_(jobs.c.status == Status.PENDING.value, jobs.c.run_at <= now),
                and_(jobs.c.status == Status.RUNNING.value, jobs.c.lease_until < now),
            )
        )
        .group_by(jobs.c.kind)
    )
    return {str(kind): int(count) for kind, count in connection.execute(query)}


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


def purge(engine: Engine, finished_before: datetime, limit: int | None = None) -> int:
    """Delete finished jobs past the retention, which frees their idempotency keys; at most
    ``limit`` in one transaction (callers loop, so no lock is held past a deadline)."""
    expired = and_(
        jobs.c.finished_at < finished_before, jobs.c.status.in_([s.value for s in FINISHED])
    )
    statement = delete(jobs).where(expired)
    if limit is not None:
        chunk = select(jobs.c.id).where(expired).limit(limit).scalar_subquery()
        statement = delete(jobs).where(jobs.c.id.in_(chunk))
    with unavailable_on_db_fault(), engine.begin() as connection:
        return connection.execute(statement).rowcount


# --- operations for the dashboard ---------------------------------------------------------------


def retry_dead_of_kind(engine: Engine, now: datetime, kind: str) -> int:
    """Make every dead job of one kind pending again with fresh attempts (history kept)."""
    statement = (
        update(jobs)
        .where(jobs.c.status == Status.DEAD.value, jobs.c.kind == kind)
        .values(
            status=Status.PENDING.value, attempts=0, run_at=now, lease_until=None,
            claimed_by=None, updated_at=now, finished_at=None,
        )
    )  # fmt: skip
    with unavailable_on_db_fault(), engine.begin() as connection:
        return connection.execute(statement).rowcount
