"""The reports of an HTTP target that answered a job's call ``202 Accepted``: a heartbeat, which
keeps the job's claim (and tells the target when an operator cancelled it), and one completion
(docs/long-running-jobs.md).

The target proves which claim it works under with the token the call carried
(``X-Consumer-Claim``): every write here is guarded by the job's id, that token and ``running``,
as the sweep's own writes are. A report under an older claim (the lease lapsed and the job was
taken over) or for a job that is no longer running is refused (409) and changes nothing; two
completions racing for one job: the first write wins, the other finds nothing to update (409).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NoReturn

from sqlalchemy import Connection

from consumer.db.store import Store
from consumer.errors import BadRequest
from consumer.jobs import running_queries as q
from consumer.jobs.debounce_race import settled
from consumer.jobs.model import Status
from consumer.jobs.retry import MAX_ERROR_CHARS, next_run_at, with_error
from consumer.wire import text
from consumer.wire.json_limits import strict_loads

OUTCOMES = ("done", "retry", "dead")
MAX_RESULT_DEPTH = 64


class NoSuchJob(BadRequest):
    status = 404


class ReportRefused(BadRequest):
    """The report names a claim the job is no longer under, or a job that is not running."""

    status = 409


@dataclass(frozen=True)
class Completion:
    """What a target reports at the end: ``done``, ``retry`` (with backoff, as a failed run) or
    ``dead``; its result object and its error, both optional."""

    outcome: str
    result: dict[str, Any] | None = None
    error: str | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """The sweep's retry settings, for a ``retry`` completion."""

    max_attempts: int
    base_seconds: float
    max_seconds: float


def job_id_of(key: str) -> int:
    """The job a report's path names: its id, as the call's body carried it."""
    if not key.isascii() or not key.isdigit() or len(key) > 18:
        raise NoSuchJob(f"no job {text.storable(key, 60)!r}: the path names a job by its id")
    return int(key)


def reported(body: bytes, job_id: int) -> dict[str, Any]:
    """A report's JSON object. It must name its job (``"id"``): the signature covers the body,
    not the path, so a signed report cannot be replayed against another job of the claim."""
    try:
        document = strict_loads(body or b"{}", MAX_RESULT_DEPTH)
    except (ValueError, RecursionError):
        raise BadRequest("the report is not a JSON object") from None
    if not isinstance(document, dict):
        raise BadRequest("the report is not a JSON object")
    if document.get("id") != job_id or isinstance(document.get("id"), bool):
        raise BadRequest(f'the report must name its job: "id": {job_id}')
    return document


def completion_of(document: dict[str, Any]) -> Completion:
    """``{"id", "outcome": done|retry|dead, "result"?: object, "error"?: string}``."""
    outcome, result, error = document.get("outcome"), document.get("result"), document.get("error")
    if outcome not in OUTCOMES:
        raise BadRequest(f"outcome must be one of {', '.join(OUTCOMES)}")
    if result is not None and not isinstance(result, dict):
        raise BadRequest("result must be a JSON object")
    if error is not None and not isinstance(error, str):
        raise BadRequest("error must be a string")
    return Completion(outcome, result, None if error is None else error[:MAX_ERROR_CHARS])


class JobReports(Store):
    """The guarded writes of a target's reports."""

    def kind_of(self, job_id: int) -> str:
        """The job's kind (which target, so which secret, may report on it); ``NoSuchJob``."""
        with self._read() as conn:
            row = conn.execute(q.row_of(job_id)).first()
        if row is None:
            raise NoSuchJob(f"no job {job_id}")
        return str(row.kind)

    def heartbeat(self, job_id: int, token: str, now: datetime, lease_seconds: float) -> Status:
        """Push the claim's lease on; ``cancelled`` (ended now) if an operator asked."""
        params = {"job_id": job_id, "token": token, "now": now,
                  "lease": now + timedelta(seconds=lease_seconds)}  # fmt: skip
        with self._write() as conn:
            row = conn.execute(q.HEARTBEAT, params).first()
            if row is None:
                _refuse(conn, job_id, token)
        return Status(row[0])

    def complete(
        self, job_id: int, token: str, completion: Completion, now: datetime, policy: RetryPolicy
    ) -> Status:
        """Record the target's outcome, exactly once: ``done``, ``pending`` again (retry),
        ``dead``, or ``cancelled`` if an operator asked meanwhile."""
        with self._write() as conn:
            found = conn.execute(q.row_of(job_id)).first()
            if found is None or found.status != Status.RUNNING or found.claimed_by != token:
                _refuse(conn, job_id, token)
            params = _completed(found, completion, now, policy)
            written = {"job_id": job_id, "token": token, **params}
            retried = params["new_status"] == Status.PENDING.value
            row = settled(
                conn, lambda: conn.execute(q.COMPLETE, written).first(), retried, [job_id]
            )
            if row is None:  # another report won between the read and the write
                raise ReportRefused(f"job {job_id} was completed by another report")
        return Status(row[0])


def _completed(
    found: Any, completion: Completion, now: datetime, policy: RetryPolicy
) -> dict[str, Any]:
    limit = found.max_attempts or policy.max_attempts
    status = {"done": Status.DONE, "dead": Status.DEAD, "retry": Status.PENDING}[completion.outcome]
    if status is Status.PENDING and found.attempts >= limit:
        status = Status.DEAD
    failed = status is not Status.DONE
    error = completion.error or f"the target reported {completion.outcome}"
    history = found.errors or []
    run_at = found.run_at
    if status is Status.PENDING:
        run_at = next_run_at(now, found.attempts, policy.base_seconds, policy.max_seconds)
    return {
        "now": now, "new_status": status.value, "new_run_at": run_at,
        "error": error if failed else None, "result": completion.result,
        "history": with_error(history, found.attempts, now, error) if failed else history,
        "new_finished_at": None if status is Status.PENDING else now,
    }  # fmt: skip


def _refuse(conn: Connection, job_id: int, token: str) -> NoReturn:
    """Why a guarded report wrote nothing: raises ``NoSuchJob`` or ``ReportRefused``."""
    row = conn.execute(q.row_of(job_id)).first()
    if row is None:
        raise NoSuchJob(f"no job {job_id}")
    if row.status != Status.RUNNING:
        raise ReportRefused(f"job {job_id} is {row.status}, not running")
    if row.claimed_by != token:
        raise ReportRefused(f"job {job_id} is no longer under this claim (it was taken over)")
    raise ReportRefused(f"job {job_id} was reported on by another report")
