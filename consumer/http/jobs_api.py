"""The job API's handlers (docs/job-api.md): ``POST /jobs``, ``GET``/``DELETE /jobs/{key}`` and
``POST /jobs/{key}/retry``, answered by the front door (``consumer.http.door``) on every serving,
once it has admitted the request (``consumer.http.gate``; who may call: ``consumer.http.callers``).

A handler reads the body (at most the row's limit), checks an HMAC signature over the request's
method, path and body with the verifier the door chose, then runs one operation of
``consumer.jobs.api``. Every answer is a JSON document shaped as the door's others: ``outcome``
and ``key`` first, then the job, or the ``error`` (and the job's ``status`` for a 409).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine

from consumer.auth.signature import request_message
from consumer.config.settings import Settings
from consumer.errors import ConsumerError
from consumer.http.deliveries import read_body
from consumer.http.gate import Admission
from consumer.http.routes import Handler
from consumer.jobs import api_request
from consumer.jobs.api import Conflict, JobApi
from consumer.jobs.model import Status
from consumer.pipeline.registry import Registry
from consumer.wire.outcomes import from_error
from consumer.wire.timeutil import Clock

log = logging.getLogger("consumer.jobs.api")
Reply = tuple[int, dict[str, Any]]


class JobAnswers:
    """The job API of one app: its engine, its registry's kinds, its clock."""

    def __init__(
        self, settings: Settings, engine: Engine, registry: Registry, clock: Clock
    ) -> None:
        self.kinds = registry.job_kinds
        self.group_by = {name: limit.group_by for name, limit in registry.job_limits.items()}
        self.api = JobApi(engine, self.kinds.names(), settings.jobs.max_attempts)
        self.limits = api_request.Limits(
            settings.jobs.max_payload_bytes, settings.inbox.max_json_nodes,
            settings.inbox.max_json_depth,
        )  # fmt: skip
        self.clock = clock
        self._handlers: dict[tuple[Handler, str], Callable[[str, bytes], Reply]] = {
            (Handler.JOB_ENQUEUE, "POST"): self._enqueue,
            (Handler.JOB, "GET"): self._read,
            (Handler.JOB, "DELETE"): self._cancel,
            (Handler.JOB_RETRY, "POST"): self._retry,
        }

    def answer(self, admission: Admission, environ: dict[str, Any]) -> Reply:
        """The status and JSON document of an admitted request."""
        route, method = admission.route, admission.view.method
        assert route is not None  # the door hands only its own rows here
        key = admission.params.get("key", "")
        try:
            body = read_body(environ, admission.limit)
            signed = request_message(method, route.path.format(**admission.params), body)
            admission.credentials.verify_body(signed, self.clock())
            return self._handlers[route.handler, method](key, body)
        except ConsumerError as error:
            return refused(error, key)

    def _enqueue(self, _key: str, body: bytes) -> Reply:
        request = api_request.parse(body, self.kinds, self.limits, self.group_by)
        job, created = self.api.enqueue(request.job)
        document = self._document("created" if created else "existing", job)
        return (201 if created else 200), {**document, "ignored_fields": request.ignored_fields}

    def _read(self, key: str, _body: bytes) -> Reply:
        return 200, self._document("found", self.api.get(key))

    def _cancel(self, key: str, _body: bytes) -> Reply:
        """200 when the job is cancelled; 202 when it runs and its cancel is requested (it ends
        ``cancelled`` at its next heartbeat: docs/long-running-jobs.md)."""
        job = self.api.cancel(key, self.clock())
        if job.status is Status.RUNNING:
            return 202, self._document("cancel-requested", job)
        return 200, self._document("cancelled", job)

    def _retry(self, key: str, _body: bytes) -> Reply:
        return 200, self._document("retried", self.api.retry(key, self.clock()))

    def _document(self, outcome: str, job: Any) -> dict[str, Any]:
        return {"outcome": outcome, "key": job.idempotency_key, "job": self.api.describe(job)}


def refused(error: ConsumerError, key: str) -> Reply:
    """A refusal's answer: the outcome table's (``rejected`` 4xx, ``unavailable`` 503), the key it
    was about, and for a 409 the job's status; logged once."""
    outcome = from_error(error)
    document = {**outcome.body(), "key": key}
    if isinstance(error, Conflict):
        document["status"] = error.state
    log.info(
        "job API request refused", extra={"status": outcome.http_status, "error": error.message}
    )
    return outcome.http_status, document
