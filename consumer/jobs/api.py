"""The job API's reads and changes of one job, by its idempotency key (docs/job-api.md): enqueue
(idempotent by key), read, cancel and retry. No transport: ``consumer.http.jobs_api`` answers
HTTP with these, and each fault is a ``ConsumerError`` whose status is the answer's (404 for an
unknown key, 409 for a key taken by another kind or a job in the wrong state).

Each change runs in one transaction, which NOTIFYs (``consumer.jobs.notify``) when it makes a job
due now, so a listening pod starts it at commit; the Pub/Sub wake-up follows the commit where
one is configured (``consumer.jobs.wake``), as after any enqueue.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine

from consumer.db.engine import unavailable_on_db_fault
from consumer.errors import BadRequest, Unavailable
from consumer.jobs import notify, queries, wake
from consumer.jobs.model import InvalidJob, Job, NewJob, Status
from consumer.jobs.store import JobStore


class NoSuchJob(BadRequest):
    status = 404


class Conflict(BadRequest):
    """The job exists but cannot do what was asked; ``state`` is its status (or ``kind``)."""

    status = 409

    def __init__(self, message: str, state: str) -> None:
        super().__init__(message)
        self.state = state


class JobApi:
    """The operations, on one engine, for the kinds this process runs."""

    def __init__(self, engine: Engine, kinds: Collection[str], default_max_attempts: int) -> None:
        self.engine, self.kinds = engine, tuple(kinds)
        self.store = JobStore(engine)
        self.default_max_attempts = default_max_attempts

    def enqueue(self, job: NewJob) -> tuple[Job, bool]:
        """The job under ``job.key`` and whether this call created it. The same key answers the
        existing job (whatever its payload), unless it is another kind's: ``Conflict``."""
        with unavailable_on_db_fault(), self.engine.begin() as connection:
            try:
                result = self.store.enqueue(job, kinds=self.kinds, connection=connection)
            except InvalidJob as exc:  # parsed already; a kind gone since is still a 400
                raise BadRequest(str(exc)) from None
            found = self._find(connection, str(job.key))
            if found is None:  # purged between the insert's conflict and this read
                raise Unavailable("the job under this key was just purged: send the request again")
            if not result.inserted and found.kind != job.kind:
                raise Conflict(
                    f"kind: key {job.key!r} is taken by a job of kind {found.kind!r}, not "
                    f"{job.kind!r}", "kind",
                )  # fmt: skip
        if result.inserted:
            wake.committed(self.engine)
        return found, result.inserted

    def get(self, key: str) -> Job:
        with unavailable_on_db_fault(), self.engine.connect() as connection:
            return self._existing(connection, key)

    def cancel(self, key: str, now: datetime) -> Job:
        """A pending job (due or not) becomes ``cancelled``; a running one has its cancel
        requested (``cancel_running``); a finished one: ``Conflict`` naming its status."""
        with unavailable_on_db_fault(), self.engine.begin() as connection:
            job = self._existing(connection, key)
            if job.status is Status.PENDING:
                if self.store.cancel(job.id, now, connection=connection):
                    return self._existing(connection, key)
                job = self._existing(connection, key)  # claimed meanwhile: now running
            if job.status is Status.RUNNING:
                return self.cancel_running(job, now, connection)
        raise Conflict(f"{job.status}: the job has finished; only a pending job can be cancelled",
                       job.status.value)  # fmt: skip

    def cancel_running(self, job: Job, now: datetime, connection: Connection) -> Job:
        """A running job's cancel, requested (``JobStore.request_cancel``): its next heartbeat
        sees it and it ends ``cancelled``, never retried; the re-read job (still ``running``,
        or ``cancelled`` at once when its holder's lease had lapsed)."""
        self.store.request_cancel(job.id, now, connection=connection)
        return self._existing(connection, str(job.idempotency_key))

    def retry(self, key: str, now: datetime) -> Job:
        """A dead or cancelled job runs again (pending now, fresh attempts, its error history
        kept); any other: ``Conflict`` naming its status."""
        with unavailable_on_db_fault(), self.engine.begin() as connection:
            job = self._existing(connection, key)
            retried = job.status in (Status.DEAD, Status.CANCELLED) and bool(
                self.store.retry(now, job.id, connection=connection)
            )
            if retried:
                notify.due(connection, [now])
                job = self._existing(connection, key)
        if not retried and job.status in (Status.DEAD, Status.CANCELLED):
            raise Conflict(f"{job.status}: a later pending job holds its debounce key",
                           job.status.value)  # fmt: skip
        if not retried:
            raise Conflict(f"{job.status}: only a dead or cancelled job can be retried",
                           job.status.value)  # fmt: skip
        wake.committed(self.engine)
        return job

    def describe(self, job: Job) -> dict[str, Any]:
        """What a caller sees of a job: its state, never its payload."""
        return {
            "key": job.idempotency_key, "id": job.id, "kind": job.kind,
            "status": job.status.value, "attempts": job.attempts,
            "max_attempts": job.max_attempts or self.default_max_attempts,
            "priority": job.priority, "group": job.group_key, "run_at": _time(job.run_at),
            "result": job.result,
            "last_error": job.last_error, "created_at": _time(job.created_at),
            "updated_at": _time(job.updated_at), "finished_at": _time(job.finished_at),
            "cancel_requested": job.cancel_requested_at is not None,
        }  # fmt: skip

    def _existing(self, connection: Connection, key: str) -> Job:
        job = self._find(connection, key)
        if job is None:
            raise NoSuchJob(f"no job has the key {key!r}")
        return job

    def _find(self, connection: Connection, key: str) -> Job | None:
        job_id = connection.execute(queries.id_of_key(key)).scalar()
        return None if job_id is None else self.store.get(int(job_id), connection=connection)


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")
