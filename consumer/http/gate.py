"""The front door: every request is matched against the route table and its caller authenticated
once, from one view of the request, before a byte of its body is read.

One door, however the app is served:

- the ASGI bridge (``consumer.http.bridge``) builds the view from the scope, runs ``Gate.admit``
  before it reads (or waits for) a body, reads at most the route's limit, and hands the request
  to ``GatedWsgi`` with the admission in its environ: the door does not run twice;
- the plain WSGI app (``consumer.http.wsgi:app()``, Flask's test client) and an app that mounts
  the routes (``consumer.http.embed``) have ``GatedWsgi`` as their WSGI callable: it builds the
  view from the environ and admits the request itself (a WSGI app reads no body until it asks).

What ``admit`` refuses, in this order: a ``Content-Length`` that is not a number (400) or over the
server's limit (413); a path no row matches (404) and a method its row does not take (405, any
case of the method: ``post`` is ``POST``); a single-valued authentication header or ``?token=``
sent twice (400); a declared body over the route's own limit (413); then the route's
authentication (401, 403; 503 when there are no certificates to check a token against). Its
decision (``consumer.http.credentials``: the scheme, the verified identity, the slot clock)
travels with the request in the environ (``ADMISSION``): the handlers read it and decide nothing
about the caller again.

An app that embeds the routes has a door for the paths under its prefix only: every other request
is the host's, passed untouched.

The refusal of a delivery (a push, a hook, a tick) is that delivery's one decision
(``consumer.pipeline.decision_log.refuse``); any other refused request is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from werkzeug.exceptions import MethodNotAllowed, NotFound

from consumer.auth.oidc import OidcAuthenticator
from consumer.auth.push import Authenticator, allow_all
from consumer.auth.signature import SIGNATURE_HEADER, TIMESTAMP_HEADER, Verifier
from consumer.config.settings import Settings
from consumer.deploy import hook
from consumer.errors import BadRequest, BodyTooLarge, ConsumerError, Unauthorized
from consumer.http import ticks
from consumer.http.callers import CallerGate
from consumer.http.credentials import NOBODY, Credentials, Scheme
from consumer.http.report_gate import ReportGate
from consumer.http.request import RequestView
from consumer.http.routes import TABLE, Auth, Route, match
from consumer.pipeline import decision_log
from consumer.pipeline.decision_log import Source
from consumer.wire.outcomes import Outcome, from_error

log = logging.getLogger("consumer.gate")
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
JOBS_DISABLED = (
    "job API is disabled: no credentials are configured (CONSUMER_JOB_API_SECRETS, or "
    "CONSUMER_JOB_API_AUDIENCE and CONSUMER_JOB_API_SERVICE_ACCOUNTS)"
)
ADMISSION = "consumer.admission"
"""The environ key of a request's ``Admission``: no client can set a key without ``HTTP_``."""


class NoRoute(BadRequest):
    status = 404


class NotAllowed(BadRequest):
    status = 405

    def __init__(self, allowed: Iterable[str]) -> None:
        super().__init__(MethodNotAllowed.description)
        self.allow = ", ".join(sorted(allowed))


class LengthRequired(BadRequest):
    """A chunked body the WSGI server cannot delimit (wsgiref): refused, never read as empty."""

    status = 411


@dataclass(frozen=True)
class Admission:
    """What the door decided: the row (None: not the consumer's request, the host's), its path
    parameters, the caller's credentials, and the most body bytes the request may bring."""

    route: Route | None
    view: RequestView
    limit: int
    credentials: Credentials = NOBODY
    params: Mapping[str, str] = field(default_factory=dict)


class Gate:
    """The checks, chosen once per app from its settings, its authenticator and its rows."""

    def __init__(
        self,
        settings: Settings,
        authenticate: Authenticator,
        *,
        routes: tuple[Route, ...] = TABLE,
        prefix: str = "",
        embedded: bool = False,
        reports: ReportGate | None = None,
    ) -> None:
        """``authenticate``: the app's own, so one certificate cache serves every request.
        ``prefix``: where the routes are mounted; ``embedded``: a request outside the prefix is
        the host app's (``consumer.http.embed``)."""
        self.max_body_bytes = settings.server.max_body_bytes
        self.routes, self.prefix, self.embedded = routes, prefix, embedded
        self._authenticate = authenticate
        self._push_scheme = _push_scheme(authenticate)
        hooks = settings.deploy_hook
        self._hook = Verifier(hooks.secrets, hooks.tolerance_seconds) if hooks.secrets else None
        certs = authenticate.certs if isinstance(authenticate, OidcAuthenticator) else None
        self._ticks = ticks.TickGate.of(settings, certs)
        self._jobs = CallerGate.of(settings.job_api, settings, certs, "the job API", JOBS_DISABLED,
                                   open_locally=True)  # fmt: skip
        self.job_payload_limit = settings.jobs.max_payload_bytes
        self._reports = reports  # a job's target reporting on it (None: refused)

    def admit(self, view: RequestView) -> Admission:
        """The request's admission; raises the ``ConsumerError`` that refuses it unread."""
        path = self._inside(view.path)
        found = match(self.routes, path) if path is not None else None
        if found is None and self.embedded and (path is None or not self.prefix):
            return Admission(None, view, self.max_body_bytes)  # the host's request
        declared = declared_size(view.headers.get("content-length"), self.max_body_bytes)
        if found is None:
            raise NoRoute(NotFound.description)
        route = found.route
        if view.method not in route.methods:
            raise NotAllowed(route.methods)
        if ambiguous := view.ambiguous():
            raise BadRequest(f"repeated {ambiguous}: it must be sent once")
        limit = route.limit(self.max_body_bytes, self.job_payload_limit)
        if declared is not None and declared > limit:
            raise BodyTooLarge(f"the body is over {limit} bytes")
        credentials = self._credentials(route.auth, view, found.params)
        return Admission(route, view, limit, credentials, found.params)

    def source_of(self, view: RequestView) -> Source | None:
        """The delivery a request is, or None."""
        path = self._inside(view.path)
        found = match(self.routes, path) if path is not None else None
        if found is None or view.method not in found.route.methods:
            return None
        return found.route.source

    def refuse(self, view: RequestView, error: ConsumerError, started: float) -> Outcome:
        """The answer to a request refused before any handler (by this door, or by the bridge
        while it read the body): a delivery's decision, recorded once, or for any other request
        a refusal logged as such."""
        source = self.source_of(view)
        if source is not None:
            return decision_log.refuse(source, error, started)
        outcome = from_error(error)
        log.info("request refused", extra={"status": outcome.http_status, "error": error.message})
        return outcome

    def _inside(self, path: str) -> str | None:
        """``path`` below the prefix, or None when it is not under it (an embedded host's)."""
        if not self.prefix:
            return path
        if path != self.prefix and not path.startswith(self.prefix + "/"):
            return None
        return path[len(self.prefix) :]

    def _credentials(self, auth: Auth, view: RequestView, params: Mapping[str, str]) -> Credentials:
        if auth is Auth.PUSH:
            return self._pusher(view)
        if auth is Auth.HOOK:
            hook.check_headers(view.headers, self._hook is not None)
            signed = {name: view.header(name.lower()) for name in SIGNED}
            return Credentials(Scheme.HMAC, verifier=self._hook, signed=signed)
        if auth is Auth.TICK:
            return self._ticks.check(view.headers)
        if auth is Auth.JOBS:
            return self._jobs.check(view.headers)
        # --- a job's HTTP target reporting on it (docs/long-running-jobs.md) ---
        if auth is Auth.JOB_REPORT:
            if self._reports is None:
                raise Unauthorized("job reports are not taken here")
            return self._reports.check(params, view.headers)
        # --- end of the job reports ---
        return NOBODY

    def _pusher(self, view: RequestView) -> Credentials:
        """A push's credentials: with Pub/Sub's OIDC token, the account it verified (checked
        once here; later layers read it from the admission)."""
        if isinstance(self._authenticate, OidcAuthenticator):
            return Credentials(Scheme.OIDC, self._authenticate.identity(view.headers))
        self._authenticate(view.headers, view.query_values())
        return Credentials(self._push_scheme)


SIGNED = (TIMESTAMP_HEADER, SIGNATURE_HEADER)


def _push_scheme(authenticate: Authenticator) -> Scheme:
    if isinstance(authenticate, OidcAuthenticator):
        return Scheme.OIDC
    return Scheme.LOCAL if authenticate is allow_all else Scheme.TOKEN


def declared_size(raw: str | bytes | None, limit: int) -> int | None:
    """The ``Content-Length`` a request declares (None: no header); ``BadRequest`` if it is not
    a number, ``BodyTooLarge`` if it is over ``limit``."""
    if raw is None:
        return None
    try:
        size = int(raw)
    except ValueError:
        raise BadRequest("Content-Length is not a number.") from None
    if size < 0:
        raise BadRequest("Content-Length is not a number.")
    if size > limit:
        raise BodyTooLarge()
    return size
