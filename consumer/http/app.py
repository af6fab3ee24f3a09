"""The Flask application: the route table, and the single mapping from errors to responses.

The views read and parse; the dispatcher decides. What the request line and headers alone
refuse (authentication included) is refused before any view by the header gate
(``consumer.http.gate``), installed around the WSGI app here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from flask import Blueprint, Flask, Response, jsonify, request
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import Engine
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from consumer.auth.push import Authenticator, authenticator_for
from consumer.config.settings import Settings
from consumer.db.engine import unavailable_on_db_fault
from consumer.db.migrate import require_schema_at_head
from consumer.deploy.hook import HOOK_MAX_BYTES, parse_hook
from consumer.deploy.signature import Verifier
from consumer.errors import BodyTooLarge, ConsumerError
from consumer.http import openapi, ticks
from consumer.http import state_metrics as metrics_state
from consumer.http.gate import Gate, GatedWsgi
from consumer.http.push_route import PushRoute, decide_push, read_body
from consumer.observe import exporting, logs, metrics, spans
from consumer.pipeline.decisions import Source
from consumer.pipeline.dispatch import Dispatcher
from consumer.service import Service
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
    """The app's WSGI callable: its header gate around the Flask app."""


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
    # One byte over the limit: Werkzeug cuts a chunked body (no Content-Length) off at this size
    # without an error, so reading one byte more is how a reader tells "at" from "over" (the
    # hook's and the ticks' bodies; a push's is read by ``push_route.read_body`` alike).
    app.config["MAX_CONTENT_LENGTH"] = settings.server.max_body_bytes + 1
    dispatcher = Dispatcher(settings, engine, service.registry, clock)
    authenticate = authenticate or authenticator_for(settings)
    limits = Limits(
        settings.inbox.max_attributes, settings.inbox.max_json_depth, settings.inbox.max_json_nodes
    )
    app.before_request(logs.bind_request)  # trace ids for this request's log lines
    app.teardown_request(logs.unbind_request)
    exporting.configure(settings.tracing)
    if spans.enabled():  # off: not even a hook per request
        trace_requests(app)

    add_deliveries(app, dispatcher, limits)
    app.add_url_rule("/healthz", "healthz", lambda: jsonify(status="ok"))
    app.add_url_rule("/readyz", "readyz", _ready_view(engine))
    state = metrics_state.collector_for(engine, dispatcher.registry, clock)
    app.add_url_rule("/metrics", "metrics", _metrics_view(state))
    app.add_url_rule("/openapi.yaml", "openapi", openapi.view)
    app.register_error_handler(HTTPException, json_http_error)
    push = PushRoute(dispatcher, limits, app.json, app.wsgi_app)  # /push served before Flask
    gated = GatedWsgi(Gate(settings, authenticate), push)
    app.wsgi_app = gated  # type: ignore[method-assign]
    app.extensions["consumer"] = BuiltWith(settings, authenticate, gated)
    return app


def add_deliveries(
    target: Flask | Blueprint,
    dispatcher: Dispatcher,
    limits: Limits,
    *,
    hook: bool = True,
    tick: bool = True,
) -> None:
    """The delivery routes, the same views wherever they are mounted (here, or in another
    team's app: ``consumer.http.embed``); ``/push`` always, the deploy hook and ``/ticks``
    unless left out."""
    target.add_url_rule("/push", "push", _push_view(dispatcher, limits), methods=["POST"])
    if hook:
        hook_view = _hook_view(dispatcher)
        target.add_url_rule("/hooks/deploy", "deploy_hook", hook_view, methods=["POST"])
    if tick:
        target.add_url_rule("/ticks/<task>", "ticks", _ticks_view(dispatcher), methods=["POST"])


def _push_view(dispatcher: Dispatcher, limits: Limits) -> Any:
    """``POST /push`` (authenticated by the gate): read and parse; the dispatcher decides. The
    view of an app that mounts the routes; ``create_app``'s own app answers a push before Flask,
    alike (``consumer.http.push_route``)."""
    max_body_bytes = dispatcher.settings.server.max_body_bytes

    def push() -> Response:
        started = time.monotonic()
        read = lambda: read_body(request.environ, max_body_bytes)  # noqa: E731
        return respond(decide_push(dispatcher, limits, dict(request.headers), read, started))

    return push


def _hook_view(dispatcher: Dispatcher) -> Any:
    """``POST /hooks/deploy`` (its headers checked by the gate): verify the signature, which
    covers the body, then parse; the dispatcher decides."""
    settings = dispatcher.settings
    verifier = Verifier(settings.deploy_hook.secrets, settings.deploy_hook.tolerance_seconds)

    def deploy_hook() -> Response:
        started = time.monotonic()
        try:
            body = _hook_body()
            verifier.verify(dict(request.headers), body, dispatcher.clock().timestamp())
            event = parse_hook(body, dispatcher.clock(), dispatcher.registry.period_of)
        except ConsumerError as error:
            return respond(dispatcher.refuse(Source.HOOK, error, started))
        return respond(dispatcher.handle(event, Source.HOOK, started))

    return deploy_hook


def _ticks_view(dispatcher: Dispatcher) -> Any:
    """``POST /ticks/<task>`` (its token or signature headers checked by the gate): verify a
    signature, which covers the body, then build the tick; the dispatcher decides."""
    settings = dispatcher.settings.tick_hook

    def tick(task: str) -> Response:
        started = time.monotonic()
        try:
            headers, body = dict(request.headers), _hook_body()
            scheduled = ticks.slot_clock(settings, headers, body, dispatcher.clock())
            message = ticks.tick_message(task, body, scheduled, headers)
        except ConsumerError as error:
            return respond(dispatcher.refuse(Source.TICKS, error, started))
        return respond(dispatcher.dispatch(message, Source.TICKS, started))

    return tick


def _hook_body() -> bytes:
    """The raw body, refused over ``HOOK_MAX_BYTES`` (an announcement is a few lines): a declared
    size over it was refused by the gate; a chunked body is read only one byte past the limit,
    not up to the push limit."""
    chunks, size = [], 0
    try:
        while size <= HOOK_MAX_BYTES and (chunk := request.stream.read(HOOK_MAX_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    except RequestEntityTooLarge:
        raise BodyTooLarge() from None
    if size > HOOK_MAX_BYTES:
        raise BodyTooLarge(f"hook body is over {HOOK_MAX_BYTES} bytes")
    return b"".join(chunks)


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
