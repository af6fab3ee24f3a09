"""The front door as a WSGI callable: admits each request once (``consumer.http.gate``), answers
the deliveries itself (``consumer.http.deliveries``) and hands the probes, and an embedding host's
own requests, to the Flask app behind it.

The ASGI bridge admits a request before reading its body and puts the admission in the environ;
the door then serves it without admitting it again. Every answer the door writes is JSON in the
bytes Flask's ``jsonify`` makes, so a refusal reads the same whichever layer made it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from werkzeug.exceptions import InternalServerError

from consumer.errors import ConsumerError
from consumer.http.deliveries import Deliveries
from consumer.http.gate import ADMISSION, Admission, Gate, LengthRequired, NotAllowed, WsgiApp
from consumer.http.job_reports import Reports
from consumer.http.jobs_api import JobAnswers
from consumer.http.request import RequestView
from consumer.http.routes import JOB_HANDLERS, REPORT_HANDLERS
from consumer.observe import logs, spans
from consumer.wire.outcomes import Outcome, from_http_status

log = logging.getLogger("consumer")
"""Flask's own logger for an app named ``consumer``: a 500 is logged where Flask logs one."""
Answer = tuple[int, list[tuple[str, str]], bytes]


def json_bytes(document: Any) -> bytes:
    """``jsonify``'s bytes: sorted keys, compact, one line."""
    return (json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n").encode()


def answer(outcome: Outcome, error: ConsumerError | None = None) -> Answer:
    """Status, headers and body of an outcome (a 405 names the methods its row takes)."""
    body = json_bytes(outcome.body())
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    if isinstance(error, NotAllowed):
        headers.append(("Allow", error.allow))
    return outcome.http_status, headers, body


def document_answer(status: int, document: Any) -> Answer:
    """Status, headers and body of a JSON document (the job API's answers)."""
    body = json_bytes(document)
    return status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))], body


def refusal(gate: Gate, view: RequestView, error: ConsumerError, started: float) -> Answer:
    """The answer to a request refused before any handler, its decision recorded once."""
    return answer(gate.refuse(view, error, started), error)


class GatedWsgi:
    """``gate`` in front of ``app`` (the Flask app's own WSGI callable), the deliveries answered
    by ``deliveries`` (None: an app with no delivery rows), the job API by ``jobs``."""

    def __init__(
        self,
        gate: Gate,
        app: WsgiApp,
        deliveries: Deliveries | None = None,
        jobs: JobAnswers | None = None,
        reports: Reports | None = None,
    ) -> None:
        self.gate, self.app, self.deliveries, self.jobs = gate, app, deliveries, jobs
        self.reports = reports
        """A job's target reporting on it (docs/long-running-jobs.md), answered here."""

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        admission = environ.get(ADMISSION)
        if not isinstance(admission, Admission):  # not admitted by the bridge: admit it here
            admitted = self._admit(environ)
            if not isinstance(admitted, Admission):
                return _respond(start_response, admitted)
            admission = environ[ADMISSION] = admitted
        if admission.route is None:  # an embedding host's own request
            return self.app(environ, start_response)
        environ["REQUEST_METHOD"] = admission.view.method  # the method every check compared
        logs.bind_environ(environ)  # this request's trace on its log lines
        try:
            if admission.route.handler in JOB_HANDLERS and self.jobs is not None:
                jobs = self.jobs
                answered = lambda: document_answer(*jobs.answer(admission, environ))  # noqa: E731
                return _respond(start_response, self._deliver(admission, environ, answered))
            if admission.route.handler in REPORT_HANDLERS and self.reports is not None:
                reported = lambda: self._report(admission, environ)  # noqa: E731
                return _respond(start_response, self._deliver(admission, environ, reported))
            if admission.route.source is None or self.deliveries is None:
                return self.app(environ, start_response)
            deliveries = self.deliveries
            decided = lambda: answer(deliveries.answer(admission, environ))  # noqa: E731
            return _respond(start_response, self._deliver(admission, environ, decided))
        finally:
            logs.unbind_request()

    def _admit(self, environ: dict[str, Any]) -> Admission | Answer:
        started = time.monotonic()
        view = RequestView.of_environ(environ)
        try:
            admission = self.gate.admit(view)
            undelimited = view.chunked() and "wsgi.input_terminated" not in environ
            if admission.route is not None and undelimited:
                raise LengthRequired("this server cannot read a chunked body: send its length")
        except ConsumerError as error:
            with logs.trace_of_environ(environ):  # the decision line carries the request's trace
                return refusal(self.gate, view, error, started)
        return admission

    def _report(self, admission: Admission, environ: dict[str, Any]) -> Answer:
        assert self.reports is not None and admission.route is not None
        view = admission.view
        return self.reports.answer(admission.route, admission.params, admission.credentials,
                                   view.headers, environ, admission.limit)  # fmt: skip

    def _deliver(
        self, admission: Admission, environ: dict[str, Any], answered: Callable[[], Answer]
    ) -> Answer:
        """A handler's answer (a delivery's, the job API's, a job target's report), inside its
        server span; a JSON 500 for an exception a handler let out, as Flask answers one."""
        assert admission.route is not None
        view = admission.view
        span = spans.start_server(view.method, admission.route.path, environ)
        status: int | None = None
        error: BaseException | None = None
        try:
            try:
                reply = answered()
            except Exception as exc:
                log.exception("Exception on %s [%s]", view.path, view.method)
                reply, error = answer(from_http_status(500, InternalServerError.description)), exc
            status = reply[0]
            return reply
        except BaseException as exc:  # a worker stopping mid-request: the span still ends
            error = exc
            raise
        finally:
            spans.end_server(span, status, error)


def _respond(start_response: Callable[..., Any], answered: Answer) -> list[bytes]:
    status, headers, body = answered
    start_response(f"{status} {HTTPStatus(status).phrase}", headers)
    return [body]
