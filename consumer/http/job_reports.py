"""``POST /jobs/{id}/heartbeat`` and ``POST /jobs/{id}/complete``: the reports of an HTTP
target that answered a job's call ``202 Accepted`` (docs/long-running-jobs.md). ``{key}`` is the
job's id (the call's body carries it as ``id``).

The front door decides who may report, once, before the body is read
(``consumer.http.report_gate``): the target that serves the job's kind. Here an HMAC signature is
checked over the body with the verifier the door chose, and the report names the claim its call
carried (``X-Consumer-Claim``): the store's guarded writes (``consumer.jobs.reports``) refuse an
older claim or a job that is no longer running (409).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Engine

from consumer.auth.signature import SIGNATURE_HEADER, TIMESTAMP_HEADER
from consumer.config.settings import Settings
from consumer.errors import BadRequest, ConsumerError
from consumer.http.credentials import Credentials
from consumer.http.deliveries import read_body
from consumer.http.routes import Handler, Route
from consumer.jobs.model import Status
from consumer.jobs.reports import (
    JobReports,
    RetryPolicy,
    completion_of,
    job_id_of,
    reported,
)
from consumer.targets.cloudevent import CLAIM_HEADER
from consumer.wire.outcomes import from_error
from consumer.wire.timeutil import Clock

Answer = tuple[int, list[tuple[str, str]], bytes]
SIGNED = (TIMESTAMP_HEADER, SIGNATURE_HEADER)


class Reports:
    """The two handlers, answered by the door (``consumer.http.door``) on any serving."""

    def __init__(self, settings: Settings, engine: Engine, clock: Clock) -> None:
        self.store, self.clock = JobReports(engine), clock
        jobs = settings.jobs
        self.lease_seconds = jobs.held_lease_seconds
        self.policy = RetryPolicy(jobs.max_attempts, jobs.retry_base_seconds,
                                  jobs.retry_max_seconds)  # fmt: skip

    def answer(
        self,
        route: Route,
        params: Mapping[str, str],
        credentials: Credentials,
        headers: Mapping[str, str],
        environ: dict[str, Any],
        limit: int,
    ) -> Answer:
        """The report's answer: 200 with the job's state, or the refusal's status."""
        try:
            job_id = job_id_of(params["id"])
            token = headers.get(CLAIM_HEADER.lower(), "").strip()
            body = read_body(environ, limit)
            credentials.verify_body(body, self.clock())
            document = reported(body, job_id)
            if not token:
                raise BadRequest(f"missing {CLAIM_HEADER} header: send the claim the call carried")
            if route.handler is Handler.JOB_HEARTBEAT:
                return _json(200, self._heartbeat(job_id, token))
            return _json(200, self._complete(job_id, token, document))
        except ConsumerError as error:
            outcome = from_error(error)
            return _json(outcome.http_status, outcome.body())

    def _heartbeat(self, job_id: int, token: str) -> dict[str, Any]:
        status = self.store.heartbeat(job_id, token, self.clock(), self.lease_seconds)
        cancelled = status is Status.CANCELLED
        answer: dict[str, Any] = {"outcome": status.value, "id": job_id, "cancelled": cancelled}
        if not cancelled:
            answer["lease_seconds"] = self.lease_seconds
        return answer

    def _complete(self, job_id: int, token: str, document: dict[str, Any]) -> dict[str, Any]:
        completion = completion_of(document)
        status = self.store.complete(job_id, token, completion, self.clock(), self.policy)
        return {"outcome": status.value, "id": job_id, "cancelled": status is Status.CANCELLED}


def _json(status: int, document: Any) -> Answer:
    """The door's JSON bytes (``jsonify``'s: sorted keys, compact, one line)."""
    body = (json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n").encode()
    return status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))], body
