"""The header gate: every refusal the request line and headers alone decide, before a body is read.

One gate, however the app is served, so no view authenticates and nothing marks a request as
checked:

- the ASGI bridge (``consumer.http.bridge``) runs it before it reads (or waits for) a body, and
  then calls the app's ungated WSGI callable;
- the plain WSGI app (``consumer.http.wsgi:app()``, Flask's test client) has it as the WSGI
  middleware ``create_app`` installs (``GatedWsgi``): a WSGI app reads no body until it asks for
  one, so there too the gate runs before the body.

What it refuses:

- any request: a ``Content-Length`` that is not a number (400) or over the body limit (413);
- ``POST /push``: the push authentication (OIDC token or ``?token=``): 401 or 403, and 503 when
  there are no certificates to check a token against;
- ``POST /hooks/deploy``: the hook's own header checks (``consumer.deploy.hook.check_headers``);
- ``POST /ticks/<task>``: the tick's OIDC token or signature headers (``consumer.http.ticks``).

An app that embeds the routes (``consumer.http.embed``) has a gate for its own paths only, under
its prefix: every other request passes untouched, unchecked.

The refusal of a delivery (a push or a hook) is that delivery's one decision
(``consumer.pipeline.decisions.refuse``); any other request refused here is logged.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl

from consumer.auth.oidc import OidcAuthenticator
from consumer.auth.push import Authenticator
from consumer.config.settings import Settings
from consumer.deploy import hook
from consumer.errors import BadRequest, BodyTooLarge, ConsumerError
from consumer.http import ticks
from consumer.http.environ import Scope
from consumer.observe import logs
from consumer.pipeline import decisions
from consumer.pipeline.decisions import Source
from consumer.wire.outcomes import Outcome, from_error

log = logging.getLogger("consumer.gate")
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
PUSH, HOOK = "/push", "/hooks/deploy"
DELIVERIES = {PUSH: Source.PUSH, HOOK: Source.HOOK}
"""The paths whose requests are deliveries (and every path under ``/ticks/``): a refusal of one
is its decision."""


def delivery_source(path: str) -> Source | None:
    """The delivery a POST to ``path`` is, or None."""
    source = DELIVERIES.get(path)
    if source is None and path.startswith(ticks.PATH):
        return Source.TICKS
    return source


class Gate:
    """The checks, chosen once per app from its settings and its authenticator."""

    def __init__(
        self,
        settings: Settings,
        authenticate: Authenticator,
        *,
        prefix: str = "",
        embedded: bool = False,
    ) -> None:
        """``authenticate``: the app's own, so one certificate cache serves every request.
        ``prefix``: where the routes are mounted; ``embedded``: only the deliveries are this
        gate's, every other request is the host app's (``consumer.http.embed``)."""
        self.max_body_bytes = settings.server.max_body_bytes
        self.prefix = prefix
        self.embedded = embedded
        self._authenticate = authenticate
        self._hook_enabled = bool(settings.deploy_hook.secrets)
        certs = authenticate.certs if isinstance(authenticate, OidcAuthenticator) else None
        self._ticks = ticks.TickGate.of(settings, certs)

    def source_of(self, method: str, path: str) -> Source | None:
        """The delivery a request is, or None."""
        if method != "POST" or not path.startswith(self.prefix):
            return None
        return delivery_source(path[len(self.prefix) :])

    def check_scope(self, scope: Scope) -> ConsumerError | None:
        """Why an ASGI request must be refused unread, or None."""
        source = self.source_of(scope["method"], scope["path"])
        if source is None and self.embedded:
            return None
        try:
            declared_size(scope_header(scope, b"content-length"), self.max_body_bytes)
            if source is not None:
                headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
                self._delivery(source, headers, scope.get("query_string", b"").decode("latin-1"))
        except ConsumerError as error:
            return error
        return None

    def check_environ(self, environ: Mapping[str, Any]) -> ConsumerError | None:
        """Why a WSGI request must be refused unread, or None."""
        source = self.source_of(environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", ""))
        if source is None and self.embedded:
            return None
        try:
            declared_size(environ.get("CONTENT_LENGTH") or None, self.max_body_bytes)
            if source is not None:
                self._delivery(source, environ_headers(environ), environ.get("QUERY_STRING", ""))
        except ConsumerError as error:
            return error
        return None

    def refuse(self, method: str, path: str, error: ConsumerError, started: float) -> Outcome:
        """The answer to a request refused before any view (by this gate, or by the bridge while
        it read the body): a delivery's decision, recorded once, or for any other request a
        refusal logged as such."""
        source = self.source_of(method, path)
        if source is not None:
            return decisions.refuse(source, error, started)
        outcome = from_error(error)
        log.info("request refused", extra={"status": outcome.http_status, "error": error.message})
        return outcome

    def _delivery(self, source: Source, headers: Mapping[str, str], query: str) -> None:
        if source is Source.PUSH:
            self._authenticate(headers, _first_values(query))
        elif source is Source.HOOK:
            hook.check_headers(headers, self._hook_enabled)
        else:
            self._ticks.check(headers)


class GatedWsgi:
    """The gate in front of a WSGI app served without the bridge. ``app`` is the ungated app,
    which the bridge calls directly once it has run the gate itself."""

    def __init__(self, gate: Gate, app: WsgiApp) -> None:
        self.gate = gate
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        started = time.monotonic()
        error = self.gate.check_environ(environ)
        if error is None:
            return self.app(environ, start_response)
        with logs.trace_of_environ(environ):  # the decision line carries the request's trace
            outcome = self.gate.refuse(environ["REQUEST_METHOD"], environ["PATH_INFO"], error,
                                       started)  # fmt: skip
        body = json.dumps(outcome.body()).encode()
        status = outcome.http_status
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        start_response(f"{status} {HTTPStatus(status).phrase}", headers)
        return [body]


def declared_size(raw: str | bytes | None, limit: int) -> int | None:
    """The ``Content-Length`` a request declares (None: no header); ``BadRequest`` if it is not
    a number, ``BodyTooLarge`` if it is over ``limit``."""
    if raw is None:
        return None
    try:
        size = int(raw)
    except ValueError:
        raise BadRequest("Content-Length is not a number.") from None
    if size > limit:
        raise BodyTooLarge()
    return size


def scope_header(scope: Scope, name: bytes) -> bytes | None:
    """The value of header ``name`` (lower-case) in an ASGI scope, or None."""
    return next((value for key, value in scope["headers"] if key == name), None)


def environ_headers(environ: Mapping[str, Any]) -> dict[str, str]:
    """The request headers of a WSGI environ, lower-cased (every check compares names so)."""
    headers = {
        key[5:].replace("_", "-").lower(): value
        for key, value in environ.items()
        if key.startswith("HTTP_")
    }
    for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(key):
            headers[key.replace("_", "-").lower()] = environ[key]
    return headers


def _first_values(query: str) -> dict[str, str]:
    """The query's parameters, the first value of each (as Flask's ``request.args.get``)."""
    values: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        values.setdefault(name, value)
    return values
