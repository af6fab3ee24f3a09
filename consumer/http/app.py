"""The Flask application behind the front door, and the single mapping from errors to responses.

Every request meets the front door first (``consumer.http.door``, installed around the WSGI app
here): it matches the route table (``consumer.http.routes``), authenticates, and answers the
deliveries itself (``consumer.http.deliveries``). Flask serves the probes and documents only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import Flask, Response, jsonify, request
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import Engine
from werkzeug.exceptions import HTTPException

from consumer.auth.push import Authenticator, authenticator_for
from consumer.config.settings import Settings
from consumer.db.engine import unavailable_on_db_fault
from consumer.db.migrate import require_schema_at_head
from consumer.errors import ConsumerError
from consumer.http import openapi, routes
from consumer.http import state_metrics as metrics_state
from consumer.http.deliveries import Deliveries
from consumer.http.door import GatedWsgi
from consumer.http.gate import Gate
from consumer.http.job_reports import Reports
from consumer.http.jobs_api import JobAnswers
from consumer.http.report_gate import report_gate
from consumer.http.routes import Handler
from consumer.observe import exporting, metrics, spans
from consumer.pipeline import admission
from consumer.pipeline.dispatch import Dispatcher
from consumer.service import Service
from consumer.targets.install import specs_of
from consumer.wire.envelope import Limits
from consumer.wire.outcomes import Outcome, from_error, from_http_status
from consumer.wire.timeutil import Clock, utcnow


@dataclass(frozen=True)
class BuiltWith:
    """What ``create_app`` built an app from, kept in ``app.extensions["consumer"]`` so what
    wraps the app (the bridge) reuses it: nothing is built twice per worker, and the bridge runs
    the app's own gate, then its ungated callable (``gated.app``), so the gate runs once."""

    settings: Settings
    authenticate: Authenticator
    gated: GatedWsgi
    """The app's WSGI callable: its front door around the Flask app."""


def built_with(app: Flask) -> BuiltWith | None:
    """What an app ``create_app`` built was built with (None for any other app)."""
    found = app.extensions.get("consumer")
    return found if isinstance(found, BuiltWith) else None


def create_app(
    service: Service, clock: Clock = utcnow, authenticate: Authenticator | None = None
) -> Flask:
    """The service's HTTP face, from the composed service (``consumer.service``): its settings,
    registry and engine. Nothing is read from the process here, and nothing is composed."""
    settings, engine = service.settings, service.engine
    settings.validate()
    app = Flask("consumer")
    dispatcher = Dispatcher(settings, engine, service.registry, clock)
    authenticate = authenticate or authenticator_for(settings)
    admission.announce(settings)  # permissive routing is said at start
    exporting.configure(settings.tracing)
    if spans.enabled():  # off: not even a hook per request
        trace_requests(app)
    views = {
        Handler.HEALTHZ: lambda: jsonify(status="ok"),
        Handler.READYZ: _ready_view(engine),
        Handler.METRICS: _metrics_view(
            metrics_state.collector_for(engine, service.registry, clock)
        ),
        Handler.OPENAPI: openapi.view,
    }
    for route in routes.PROBES:  # the deliveries are the door's (consumer.http.deliveries)
        app.add_url_rule(route.path, route.handler.value, views[route.handler])
    app.register_error_handler(HTTPException, json_http_error)
    deliveries = Deliveries(dispatcher, limits_of(settings))
    jobs = JobAnswers(settings, engine, service.registry, clock)
    reports = report_gate(settings, engine, specs_of(service.registry, settings))
    gate = Gate(settings, authenticate, reports=reports)
    own_reports = Reports(settings, engine, clock)
    gated = GatedWsgi(gate, app.wsgi_app, deliveries, jobs, own_reports)
    app.wsgi_app = gated  # type: ignore[method-assign]
    app.extensions["consumer"] = BuiltWith(settings, authenticate, gated)
    return app


_SPAN, _STATUS = "consumer.span", "consumer.status"


def trace_requests(app: Flask) -> None:
    """A server span around each request (``consumer.observe.spans``), its handler's inside."""
    app.before_request(_start_span)
    app.after_request(_span_status)
    app.teardown_request(_end_span)  # teardowns run in reverse: before the logs' unbind


def _start_span() -> None:
    rule = request.url_rule
    route = rule.rule if rule else ""
    request.environ[_SPAN] = spans.start_server(request.method, route, request.environ)


def _span_status(response: Response) -> Response:
    request.environ[_STATUS] = response.status_code
    return response


def _end_span(error: BaseException | None = None) -> None:
    spans.end_server(request.environ.pop(_SPAN, None), request.environ.get(_STATUS), error)


def limits_of(settings: Settings) -> Limits:
    inbox = settings.inbox
    return Limits(inbox.max_attributes, inbox.max_json_depth, inbox.max_json_nodes)


def respond(outcome: Outcome) -> Response:
    response = jsonify(outcome.body())
    response.status_code = outcome.http_status
    return response


def _metrics_view(state: metrics_state.StateCollector) -> Any:
    def view() -> Response:
        return Response(metrics.exposition(state), mimetype=CONTENT_TYPE_LATEST)

    return view


def _ready_view(engine: Engine) -> Any:
    def ready() -> Response:
        try:
            with unavailable_on_db_fault(), engine.connect() as connection:
                require_schema_at_head(engine, connection)
        except ConsumerError as error:
            return respond(from_error(error))
        return jsonify(status="ready")

    return ready


def json_http_error(error: HTTPException) -> Response:
    """404, 405, 413... and the 500 Flask makes of an unexpected exception: JSON, no trace."""
    response = respond(from_http_status(error.code or 500, error.description or error.name))
    # Keep what the error adds besides its HTML (the Allow header of a 405).
    response.headers.extend((k, v) for k, v in error.get_headers() if k.lower() != "content-type")
    return response
