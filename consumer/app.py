"""The Flask application: the route table, and the single mapping from errors to responses."""

from __future__ import annotations

import logging
import time
from typing import Any

from flask import Flask, Response, jsonify, request
from sqlalchemy import Engine, text
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from consumer import metrics, openapi
from consumer.auth import Authenticator, authenticator_for
from consumer.db.engine import make_engine, unavailable_on_db_fault
from consumer.deploy.hook import hook_view
from consumer.dispatch import Dispatcher
from consumer.envelope import Limits, parse_push
from consumer.errors import BodyTooLarge, ConsumerError
from consumer.outcomes import Outcome, from_error
from consumer.plugins import build_registry
from consumer.registry import Registry
from consumer.settings import Settings
from consumer.timeutil import Clock, utcnow

log = logging.getLogger("consumer.app")


def create_app(
    settings: Settings,
    registry: Registry | None = None,
    engine: Engine | None = None,
    clock: Clock = utcnow,
) -> Flask:
    """Build the service. Everything it needs is passed in; nothing is read from the process."""
    settings.validate()
    app = Flask("consumer")
    # One byte over the limit: Werkzeug cuts a chunked body (no Content-Length) off at this size
    # without an error, so reading one byte more is how ``_body`` tells "at" from "over".
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes + 1
    engine = engine or make_engine(settings.database_url)
    dispatcher = Dispatcher(settings, engine, registry or build_registry(settings), clock)
    authenticate = authenticator_for(settings)
    limits = Limits(settings.max_attributes, settings.max_json_depth, settings.max_json_nodes)
    app.extensions["consumer.dispatcher"] = dispatcher

    app.add_url_rule(
        "/push", "push", _push_view(dispatcher, authenticate, limits), methods=["POST"]
    )
    app.add_url_rule(
        "/hooks/deploy", "deploy_hook", hook_view(settings, dispatcher), methods=["POST"]
    )
    app.add_url_rule("/healthz", "healthz", lambda: jsonify(status="ok"))
    app.add_url_rule("/readyz", "readyz", _ready_view(engine))
    app.add_url_rule("/metrics", "metrics", metrics.view)
    app.add_url_rule("/openapi.yaml", "openapi", openapi.view)
    app.register_error_handler(HTTPException, _http_error)
    return app


def _push_view(dispatcher: Dispatcher, authenticate: Authenticator, limits: Limits) -> Any:
    def push() -> Response:
        started = time.monotonic()
        try:
            headers = dict(request.headers)
            authenticate(headers, request.args)
            message = parse_push(headers, _body(dispatcher.settings.max_body_bytes), limits)
            outcome = dispatcher.dispatch(message)
        except ConsumerError as error:
            outcome = from_error(error)
            message = None
        _log_decision(outcome, message, time.monotonic() - started)
        return respond(outcome)

    return push


def _body(limit: int) -> bytes:
    """Read at most ``limit`` + 1 bytes (a larger Content-Length is refused unread); 413 if over."""
    try:
        body = request.get_data(cache=False)
    except RequestEntityTooLarge:
        raise BodyTooLarge() from None
    if len(body) > limit:
        raise BodyTooLarge()
    return body


def respond(outcome: Outcome) -> Response:
    response = jsonify(outcome.body())
    response.status_code = outcome.http_status
    return response


def _ready_view(engine: Engine) -> Any:
    def ready() -> Response:
        try:
            with unavailable_on_db_fault(), engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except ConsumerError as error:
            return respond(from_error(error))
        return jsonify(status="ready")

    return ready


def _http_error(error: HTTPException) -> Response:
    """404, 405, 413... and the 500 Flask makes of an unexpected exception: JSON, no trace."""
    outcome = "error" if (error.code or 500) >= 500 else "rejected"
    response = jsonify(outcome=outcome, error=error.description or error.name)
    response.status_code = error.code or 500
    # Keep what the error adds besides its HTML (the Allow header of a 405).
    response.headers.extend((k, v) for k, v in error.get_headers() if k.lower() != "content-type")
    return response


def _log_decision(outcome: Outcome, message: Any, seconds: float) -> None:
    metrics.record(outcome, seconds)
    log.info(
        "push decided",
        extra={
            "message_id": getattr(message, "message_id", None),
            "key": outcome.key,
            "route": outcome.route,
            "outcome": outcome.kind.value,
            "status": outcome.http_status,
            "attempt": outcome.details.get("attempt"),
            "duration_ms": round(seconds * 1000, 1),
            "error": outcome.details.get("error"),  # why, for every refusal (no secrets in it)
        },
    )
