"""The operator's reads and writes of ``jobs``: inspect, retry, cancel, purge (``consumer jobs``,
the dashboard, the cleanup task). ``JobStore`` has them; the statements are
``consumer.jobs.queries``'."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection

from consumer.db.store import Store
from consumer.jobs import queries
from consumer.jobs.model import Job, Status

Jobs = list[Job]
"""(A method of the store is named ``list``.)"""


class JobOperations(Store):
    """Named queries over ``jobs`` for operators: the part of ``JobStore`` no sweep runs."""

    def get(self, job_id: int, *, connection: Connection | None = None) -> Job | None:
        with self._read(connection) as conn:
            row = conn.execute(queries.by_id(job_id)).first()
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
            return [Job.from_row(row) for row in conn.execute(queries.listed(status, kind, limit))]

    def retry(
        self, now: datetime, job_id: int | None = None, *, connection: Connection | None = None
    ) -> int:
        """Make one dead or cancelled job (or, with no id, every dead job) pending again with
        fresh attempts; the error history is kept."""
        with self._write(connection) as conn:
            return conn.execute(queries.retried(now, job_id)).rowcount

    def retry_dead_of_kind(
        self, now: datetime, kind: str, *, connection: Connection | None = None
    ) -> int:
        """Make every dead job of one kind pending again with fresh attempts (history kept)."""
        with self._write(connection) as conn:
            return conn.execute(queries.retried_dead_of_kind(now, kind)).rowcount

    def cancel(self, job_id: int, now: datetime, *, connection: Connection | None = None) -> bool:
        """Cancel a pending job. A running one cannot be stopped mid-effect; cancel it after."""
        with self._write(connection) as conn:
            return conn.execute(queries.cancelled(job_id, now)).rowcount == 1

    def purge(
        self,
        finished_before: datetime,
        limit: int | None = None,
        *,
        connection: Connection | None = None,
    ) -> int:
        """Delete finished jobs past the retention, which frees their idempotency keys; at most
        ``limit`` in one transaction (callers loop, so no lock is held past a deadline)."""
        with self._write(connection) as conn:
            return conn.execute(queries.purged(finished_before, limit)).rowcount
