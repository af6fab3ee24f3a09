"""The operator's reads and writes of ``jobs``: inspect, retry, cancel, purge (``consumer jobs``,
the dashboard, the cleanup task). ``JobStore`` has them; the statements are
``consumer.jobs.queries``'."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection

from consumer.db.store import Store
from consumer.jobs import operator_queries, running_queries
from consumer.jobs.model import FINISHED, CancelOutcome, Job, Status

Jobs = list[Job]
"""(A method of the store is named ``list``.)"""


class JobOperations(Store):
    """Named queries over ``jobs`` for operators: the part of ``JobStore`` no sweep runs."""

    def get(self, job_id: int, *, connection: Connection | None = None) -> Job | None:
        with self._read(connection) as conn:
            row = conn.execute(operator_queries.by_id(job_id)).first()
        return None if row is None else Job.from_row(row)

    def list(
        self,
        status: Status | None = None,
        kind: str | None = None,
        limit: int = 50,
        *,
        connection: Connection | None = None,
    ) -> Jobs:
        """Newest first."""
        with self._read(connection) as conn:
            return [
                Job.from_row(row)
                for row in conn.execute(operator_queries.listed(status, kind, limit))
            ]

    def retry(
        self, now: datetime, job_id: int | None = None, *, connection: Connection | None = None
    ) -> int:
        """Make one dead or cancelled job (or, with no id, every dead job) pending again with
        fresh attempts; the error history is kept."""
        with self._write(connection) as conn:
            return conn.execute(operator_queries.retried(now, job_id)).rowcount

    def retry_dead_of_kind(
        self, now: datetime, kind: str, *, connection: Connection | None = None
    ) -> int:
        """Make every dead job of one kind pending again with fresh attempts (history kept)."""
        with self._write(connection) as conn:
            return conn.execute(operator_queries.retried_dead_of_kind(now, kind)).rowcount

    def cancel(self, job_id: int, now: datetime, *, connection: Connection | None = None) -> bool:
        """Cancel a pending job only (``request_cancel`` also reaches a running one)."""
        with self._write(connection) as conn:
            return conn.execute(operator_queries.cancelled(job_id, now)).rowcount == 1

    def request_cancel(
        self, job_id: int, now: datetime, *, connection: Connection | None = None
    ) -> CancelOutcome:
        """Cancel a job, whatever it is doing: the one entry point of the CLI, the dashboard
        and the HTTP job API. A pending job is ``cancelled`` now, and so is a running one whose
        holder's lease lapsed (nothing runs it any more). A running job with a live lease gets
        the request recorded: its lease heartbeat sees it (a Python handler's
        ``context.heartbeat()`` raises ``JobCancelled``, a target's call is abandoned, a target's
        ``POST /jobs/{id}/heartbeat`` is told), and however its run ends it ends ``cancelled``,
        never retried."""
        with self._write(connection) as conn:
            if conn.execute(operator_queries.cancelled(job_id, now)).rowcount == 1:
                return CancelOutcome.CANCELLED
            if conn.execute(running_queries.lapsed_cancelled(now, job_id)).rowcount == 1:
                return CancelOutcome.CANCELLED
            if conn.execute(running_queries.cancel_requested(job_id, now)).rowcount == 1:
                return CancelOutcome.REQUESTED
            status = conn.execute(running_queries.status_of(job_id)).scalar()
        if status is None:
            return CancelOutcome.UNKNOWN
        if Status(status) in FINISHED:
            return CancelOutcome.FINISHED
        return self.request_cancel(job_id, now)  # it moved between the statements: once more

    def end_lapsed_cancels(self, now: datetime, *, connection: Connection | None = None) -> int:
        """Running jobs whose cancel was requested and whose holder then died (the lease lapsed
        with no heartbeat): ``cancelled``, before any sweep takes them over (the cleanup task)."""
        with self._write(connection) as conn:
            return conn.execute(running_queries.lapsed_cancelled(now)).rowcount

    def purge(
        self,
        finished_before: datetime,
        limit: int | None = None,
        *,
        epochs: Sequence[int] | None = None,
        connection: Connection | None = None,
    ) -> int:
        """Delete finished jobs past the retention, which frees their idempotency keys; at most
        ``limit`` in one transaction (callers loop, so no lock is held past a deadline). With
        ``epochs`` (PostgreSQL), only those epochs' jobs."""
        statement = operator_queries.purged(finished_before, limit, epochs)
        with self._write(connection) as conn:
            return conn.execute(statement).rowcount
