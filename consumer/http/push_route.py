"""``POST /push`` answered from the WSGI environ, in front of Flask.

A push is the service's hot path, and Flask's machinery around a view (the request context, URL
matching, the before, after and teardown hooks, a ``Response`` object) cost about a tenth of a
push's CPU (``bench/push_bench.py``). ``PushRoute`` is WSGI middleware, inside the header gate,
that serves ``POST /push`` itself and hands every other request, ``GET /push`` included, to the
Flask app. It answers exactly as the Flask view (``consumer.http.app``) does: the same parse and
dispatcher (``decide_push``), the same JSON bytes, the same body limit (413 over it), the same
trace and log binding, and a JSON 500 for an unexpected exception. An app that mounts the
routes (``consumer.http.embed``) keeps the Flask view.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from http import HTTPStatus
from typing import Any

from flask.json.provider import JSONProvider
from werkzeug.exceptions import InternalServerError, RequestEntityTooLarge
from werkzeug.wsgi import get_input_stream

from consumer.errors import BodyTooLarge, ConsumerError
from consumer.http.gate import environ_headers
from consumer.observe import logs, spans
from consumer.pipeline.decisions import Source
from consumer.pipeline.dispatch import Dispatcher
from consumer.wire.envelope import Limits, parse_push
from consumer.wire.outcomes import Outcome, from_http_status

log = logging.getLogger("consumer")
"""Flask's own logger for an app named ``consumer``: a 500 is logged where Flask logs one."""
PATH = "/push"
Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def decide_push(
    dispatcher: Dispatcher,
    limits: Limits,
    headers: Mapping[str, str],
    read: Callable[[], bytes],
    started: float,
) -> Outcome:
    """A push's decision, however it was served: parsed, then dispatched; refused (and recorded
    as refused) if its body cannot be read or parsed."""
    try:
        message = parse_push(headers, read(), limits)
    except ConsumerError as error:
        return dispatcher.refuse(Source.PUSH, error, started)
    return dispatcher.dispatch(message, Source.PUSH, started)


def read_body(environ: dict[str, Any], limit: int) -> bytes:
    """A push's body from its WSGI environ: at most ``limit`` + 1 bytes are read, and over
    ``limit`` it is refused (413); a chunked body is read only if the server marks its end
    (``wsgi.input_terminated``), as Werkzeug reads any body."""
    try:
        body = get_input_stream(environ, max_content_length=limit + 1).read()
    except RequestEntityTooLarge:
        raise BodyTooLarge() from None
    if len(body) > limit:
        raise BodyTooLarge()
    return body


class PushRoute:
    """Serves ``POST /push`` (the exact path) from the environ; anything else goes to ``app``
    (the Flask app's WSGI callable). ``json``: the Flask app's JSON provider, so an answer's
    bytes are the ones ``jsonify`` makes."""

    def __init__(self, dispatcher: Dispatcher, limits: Limits, json: JSONProvider, app: Wsgi):
        self.dispatcher, self.limits, self.json, self.app = dispatcher, limits, json, app
        self.max_body_bytes = dispatcher.settings.server.max_body_bytes

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != PATH or environ.get("REQUEST_METHOD") != "POST":
            return self.app(environ, start_response)
        started = time.monotonic()
        logs.bind_environ(environ)  # as the Flask hooks do: the request's trace on its lines
        span = spans.start_server("POST", PATH, environ)
        status: int | None = None
        error: BaseException | None = None
        try:
            try:
                outcome = decide_push(
                    self.dispatcher, self.limits, environ_headers(environ),
                    lambda: read_body(environ, self.max_body_bytes), started,
                )  # fmt: skip
            except Exception as exc:  # as Flask answers an exception a view let out
                log.exception("Exception on %s [POST]", PATH)
                outcome, error = from_http_status(500, InternalServerError.description), exc
            body, status = self._json(outcome), outcome.http_status
            start_response(_status_line(status), [
                ("Content-Type", "application/json"), ("Content-Length", str(len(body))),
            ])  # fmt: skip
            return [body]
        except BaseException as exc:  # a worker stopping mid-request: the span still ends
            error = exc
            raise
        finally:
            spans.end_server(span, status, error)
            logs.unbind_request()

    def _json(self, outcome: Outcome) -> bytes:
        """``jsonify``'s bytes: Flask's JSON provider, compact, one line."""
        return (self.json.dumps(outcome.body(), separators=(",", ":")) + "\n").encode()


def _status_line(status: int) -> str:
    return f"{status} {HTTPStatus(status).phrase}"
