"""``JobStore``: the ``jobs`` table's queries (``consumer.jobs.queries``), run in the caller's
transaction when given its ``connection``, else in one of their own.

``enqueue`` and ``enqueue_many`` are the public entry points of the jobs API (re-exported from
``consumer.jobs``): thin functions over the store, in the shape plugins already call.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy import Connection, Engine

from consumer.db.dialect import POSTGRESQL
from consumer.db.engine import unavailable_on_db_fault
from consumer.db.pinned import PinnedConnections
from consumer.db.prepared import Build, pipelined, prepared
from consumer.jobs import bulk, queries, wake
from consumer.jobs.debounce_race import settled
from consumer.jobs.kinds import check_kinds
from consumer.jobs.model import (
    Debounce,
    EnqueueResult,
    Failure,
    InvalidJob,
    Job,
    NewJob,
    Renewed,
    Status,
    Written,
    claim_order,
    claimed_jobs,
)
from consumer.jobs.new_rows import COPY_FROM, new_row, one_job
from consumer.jobs.operations import JobOperations
from consumer.observe import spans
from consumer.wire.timeutil import utcnow


def enqueue(
    engine: Engine,
    kind: str,
    payload: Any,
    *,
    key: str | None = None,
    run_at: datetime | None = None,
    priority: int = 0,
    max_attempts: int | None = None,
    kinds: Collection[str] | None = None,
    allow_unknown: bool = False,
    lock_key: str | None = None,
    group: str | None = None,
    debounce: Debounce | None = None,
) -> EnqueueResult:
    """Insert one pending job in its own transaction (``JobStore.enqueue``), then wake a
    sweeper (``consumer.jobs.wake``). ``kinds``: the job kinds the caller's registry provides
    (``registry.job_kinds.names()``); jobs sharing a ``lock_key`` run one at a time, in order;
    jobs of different ``group``s take turns; enqueues with one ``debounce`` key in its quiet
    window are one job, with the latest payload (docs/flow-control.md)."""
    job = NewJob(kind, payload, key, run_at, priority, max_attempts, lock_key, group, debounce)
    result = JobStore(engine).enqueue(job, kinds=kinds, allow_unknown=allow_unknown)
    if result.inserted:
        wake.committed(engine)
    return result


def enqueue_many(
    connection: Connection,
    new_jobs: Iterable[NewJob],
    *,
    kinds: Collection[str] | None = None,
    allow_unknown: bool = False,
) -> int:
    """Bulk-insert within the caller's transaction (``JobStore.enqueue_many``); a sweeper is
    woken when that transaction commits."""
    new_jobs = list(new_jobs)
    if any(job.debounce is not None for job in new_jobs):
        raise InvalidJob("a debounced job is enqueued one at a time (enqueue(..., debounce=))")
    store = JobStore(connection.engine)
    inserted = store.enqueue_many(
        new_jobs, kinds=kinds, allow_unknown=allow_unknown, connection=connection
    )
    if inserted:
        wake.on_commit(connection)
    return inserted


Jobs = list[Job]
"""(A method of the store is named ``list``.)"""


class JobStore(JobOperations):
    """Named queries over ``jobs``: enqueue, the sweep's claim and guarded writes, and the
    operator's (``JobOperations``)."""

    def enqueue(
        self,
        job: NewJob,
        *,
        kinds: Collection[str] | None = None,
        allow_unknown: bool = False,
        connection: Connection | None = None,
    ) -> EnqueueResult:
        """Insert one pending job. A job with the same idempotency key (unfinished or finished,
        until purged) is reported, never inserted twice: the unique index decides, so concurrent
        callers cannot both win. A kind neither built in nor in ``kinds`` is refused
        (``UnknownKind``) unless ``allow_unknown``."""
        check_kinds([job], kinds, allow_unknown)
        alone = connection is None and self.dialect == POSTGRESQL and job.debounce is None
        with unavailable_on_db_fault(), self._alone() if alone else self._write(connection) as conn:
            if job.debounce is not None:
                statement = queries.debounced(self.dialect)
                inserted = conn.execute(statement, new_row(job, utcnow())).scalar()
                inserted = inserted or conn.scalar(queries.id_of_debounced(job.debounce.key))
            elif self.dialect == POSTGRESQL:
                found = prepared(one_job, conn.dialect).first(conn, new_row(job, utcnow()))
                inserted = None if found is None else found[0]
            else:
                statement = queries.enqueue(self.dialect)
                inserted = conn.execute(statement, new_row(job, utcnow())).scalar()
            if inserted is not None:  # due now: the table's trigger NOTIFYs on commit
                return EnqueueResult(int(inserted), inserted=True)
            existing = conn.execute(queries.id_of_key(job.key)).scalar()
        return EnqueueResult(None if existing is None else int(existing), inserted=False)

    def _alone(self) -> AbstractContextManager[Connection]:
        """This thread's kept connection in autocommit (``PinnedConnections``), for one job's
        insert: a statement that is its own transaction, with no pool checkout and no round trips
        for ``BEGIN`` and ``COMMIT`` (the insert's NOTIFY commits with it). Those cost about as
        much CPU as the insert itself."""
        return PinnedConnections.of(self.engine).connection()

    def enqueue_many(
        self,
        new_jobs: Iterable[NewJob],
        *,
        kinds: Collection[str] | None = None,
        allow_unknown: bool = False,
        connection: Connection | None = None,
    ) -> int:
        """Bulk-insert; rows whose key already exists (among unfinished or finished jobs, or
        earlier in ``new_jobs``: the first wins) are skipped. Returns how many were inserted, with
        ids in ``new_jobs``' order. Any kind neither built in nor in ``kinds`` refuses the whole
        call (``UnknownKind``, nothing inserted) unless ``allow_unknown``. On PostgreSQL many jobs
        are ``COPY``-ed and moved by one ``INSERT ... SELECT`` (``bulk.insert_new_jobs``): a
        multi-row ``INSERT`` spent most of its CPU in the driver parsing its parameters."""
        new_jobs = list(new_jobs)
        check_kinds(new_jobs, kinds, allow_unknown)
        if not new_jobs:
            return 0
        now = utcnow()
        with self._write(connection) as conn:
            if self.dialect == POSTGRESQL and len(new_jobs) >= COPY_FROM:
                trace_parent = spans.current_traceparent()
                inserted = bulk.insert_new_jobs(conn, new_jobs, now, trace_parent)
            else:
                rows = [new_row(job, now) for job in new_jobs]
                inserted = len(conn.execute(queries.enqueue(self.dialect), rows).all())
            return inserted  # those due now: the table's trigger NOTIFYs on commit

    # --- the sweep: claim, then guarded writes ---------------------------------------------------

    def claim(
        self,
        token: str,
        limit: int,
        kinds: Collection[str],
        now: datetime,
        lease_until: datetime,
        *,
        connection: Connection | None = None,
        excluded: Sequence[str] = (),
    ) -> Jobs:
        """Claim up to ``limit`` jobs of ``kinds`` in one statement: leases that expired first
        (their sweeper died), then due pending jobs by priority and turn (none of the groups
        ``excluded``)."""
        params = {
            "token": token, "limit": limit, "kinds": list(kinds), "now": now,
            "lease": lease_until,
        }  # fmt: skip
        with self._write(connection) as conn:
            if excluded:
                statement = queries.claim(self.dialect, True)
                rows = conn.execute(statement, {**params, "excluded": list(excluded)}).all()
            elif self.dialect == POSTGRESQL:
                # The driver's own tuples: no Row objects for a hundred rows.
                rows = prepared(queries.claim, conn.dialect).all(conn, params)
            else:
                rows = conn.execute(queries.claim(self.dialect), params).all()
        claimed = claimed_jobs(rows, payloads_as_text=self.dialect == POSTGRESQL)
        return sorted(claimed, key=claim_order)

    def claim_then(
        self,
        token: str,
        limit: int,
        kind: str,
        now: datetime,
        lease_until: datetime,
        then: Build,
        values: Mapping[str, Any],
        connection: Connection,
    ) -> tuple[Jobs, Any]:
        """PostgreSQL: ``claim`` of one kind and, in the same round trip, the statement
        ``then(dialect)`` (run after the claim, with a snapshot of its own): the jobs, and the
        first row ``then`` returned."""
        params = {
            "token": token, "limit": limit, "kinds": [kind], "now": now, "lease": lease_until,
        }  # fmt: skip
        claim = prepared(queries.claim, connection.dialect)
        after = prepared(then, connection.dialect)
        steps = [(claim, params, _fetchall), (after, values, _fetchone)]
        tuples, first_row = pipelined(connection, steps)
        return sorted(claimed_jobs(tuples, payloads_as_text=True), key=claim_order), first_row

    def renew(
        self, token: str, lease_until: datetime, *, connection: Connection | None = None
    ) -> Renewed:
        """Extend the lease of every job ``token`` still holds (never shortening one held for
        its target), and say which of them an operator asked to cancel."""
        with self._write(connection) as conn:
            rows = conn.execute(queries.RENEW, {"token": token, "lease": lease_until}).all()
        cancelled = frozenset(int(job_id) for job_id, asked in rows if asked is not None)
        return Renewed(len(rows), cancelled)

    def complete(
        self,
        token: str,
        now: datetime,
        done: Sequence[int] = (),
        failures: Sequence[Failure] = (),
        released: Sequence[int] = (),
        *,
        held: Sequence[int] = (),
        held_until: datetime | None = None,
        connection: Connection | None = None,
    ) -> Written:
        """Record a batch, every write guarded by the claim's token; ``held``: jobs whose target
        answered 202, kept running under the claim until ``held_until``."""
        base = {"token": token, "now": now}
        with self._write(connection) as conn:
            done_count = self._done(conn, base, done)
            counts = {True: 0, False: 0}
            for failure in failures:
                params = {**base, **_failure(failure, now)}
                failed = partial(_rowcount, conn, params)
                counts[failure.dead] += settled(conn, failed, not failure.dead, [failure.job_id])
            unrun = queries.released(self.dialect)
            releasing = partial(_for_ids, conn, unrun, base, released)
            released_count = settled(conn, releasing, bool(released), released)
            holding = {**base, "lease": held_until}
            held_count = _for_ids(conn, queries.held(self.dialect), holding, held)
        return Written(done_count, counts[False], counts[True], released_count, held_count)

    def _done(self, conn: Connection, base: dict[str, Any], ids: Sequence[int]) -> int:
        """The batch's ``done`` write; on PostgreSQL a prepared statement (one array of ids)."""
        if not ids:
            return 0
        if self.dialect != POSTGRESQL:
            return _for_ids(conn, queries.done(self.dialect), base, ids)
        return prepared(queries.done, conn.dialect).rowcount(conn, {**base, "ids": list(ids)})

    def due_by_kind(self, now: datetime, *, connection: Connection | None = None) -> dict[str, int]:
        """Due pending jobs plus expired leases, by kind (whatever the kind: a sweep reports the
        due jobs it has no kind for)."""
        with self._read(connection) as conn:
            return {str(kind): int(n) for kind, n in conn.execute(queries.due_by_kind(now))}


def _for_ids(
    connection: Connection, statement: Any, base: dict[str, Any], ids: Sequence[int]
) -> int:
    return connection.execute(statement, {**base, "ids": list(ids)}).rowcount if ids else 0


def _rowcount(connection: Connection, params: dict[str, Any]) -> int:
    return int(connection.execute(queries.FAILED, params).rowcount)


def _failure(failure: Failure, now: datetime) -> dict[str, Any]:
    return {
        "job_id": failure.job_id, "error": failure.error, "history": failure.errors,
        "new_status": (Status.DEAD if failure.dead else Status.PENDING).value,
        "new_run_at": failure.run_at, "new_finished_at": now if failure.dead else None,
    }  # fmt: skip


def _fetchall(cursor: Any) -> Any:
    return cursor.fetchall()


def _fetchone(cursor: Any) -> Any:
    return cursor.fetchone()
