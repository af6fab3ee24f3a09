"""``POST /ticks/<task>``: who may send a tick from any scheduler that can make an HTTP call
(docs/ticks.md). Pure: no Flask, no I/O but the token check; the handler is in
``consumer.http.deliveries``, the tick it becomes is read by ``consumer.ticks.hook``, with the
*scheduled* time as its ``publish_time``. Two ways in, chosen per request by what it carries:

- ``Authorization: Bearer <ID token>`` (Cloud Scheduler's HTTP target with an OIDC token): the
  token is checked by the front door, for ``CONSUMER_TICK_HOOK_AUDIENCE`` and one of
  ``CONSUMER_TICK_HOOK_SERVICE_ACCOUNTS``. The slot clock is ``X-CloudScheduler-ScheduleTime``
  (RFC 3339, UTC); without it (a forced run, another OIDC caller), the time we received it.
- otherwise the deploy hook's HMAC scheme (``consumer.auth.signature``) under
  ``CONSUMER_TICK_HOOK_SECRETS``: the door checks the headers, the handler the signature over the
  body with the scheme and header values the door decided (``consumer.http.credentials``). The slot
  clock is the signed ``X-Consumer-Timestamp``: a forger cannot choose it without a secret, the
  verifier refuses one further than the tolerance from our clock, and a slot that has not begun is
  refused by the dispatcher, unrecorded. The signature covers the body, not the path, so a signed
  body must name its task: a captured request cannot be replayed against another task.
"""

from __future__ import annotations

from collections.abc import Mapping

from consumer.auth.certs import CachedCerts
from consumer.auth.oidc import OidcAuthenticator
from consumer.auth.signature import SIGNATURE_HEADER, TIMESTAMP_HEADER, Verifier
from consumer.config.settings import Settings
from consumer.config.ticks import TickHookSettings
from consumer.deploy import hook
from consumer.errors import Unauthorized
from consumer.http.credentials import Credentials, Scheme
from consumer.ticks.hook import scheduled_time

PATH = "/ticks/"
SIGNED_HEADERS = (TIMESTAMP_HEADER, SIGNATURE_HEADER)


class TickGate:
    """The front door's checks of a tick (``consumer.http.gate``), before its body is read: they
    decide the scheme once, and the handler reads that decision (``Credentials``)."""

    def __init__(
        self, settings: TickHookSettings, oidc: OidcAuthenticator | None, verifier: Verifier
    ) -> None:
        self.settings = settings
        self._oidc = oidc
        self._verifier = verifier

    @classmethod
    def of(cls, settings: Settings, certs: CachedCerts | None = None) -> TickGate:
        """``certs``: the push authenticator's cache when it has one (the same Google keys)."""
        ticks = settings.tick_hook
        verifier = Verifier(ticks.secrets, ticks.tolerance_seconds)
        if not ticks.oidc:
            return cls(ticks, None, verifier)
        oidc = OidcAuthenticator(
            audience=ticks.audience,
            accounts=ticks.service_accounts,
            certs=certs or CachedCerts(settings.auth.oidc_certs_url),
            clock_skew_seconds=settings.auth.oidc_clock_skew_seconds,
        )
        return cls(ticks, oidc, verifier)

    def check(self, headers: Mapping[str, str]) -> Credentials:
        """The caller's credentials: a token is OIDC (verified here), anything else must be
        signed (headers checked here, the signature over the body by the handler).
        ``Unauthorized``/``Forbidden`` for a caller the headers do not show allowed; 400 for a
        malformed scheduled time. ``headers``: the request's one view, names lower-case."""
        if not self.settings.enabled:
            raise Unauthorized("tick endpoint is disabled: no credentials are configured")
        if not headers.get("authorization", "").strip():
            if not self.settings.secrets:
                raise Unauthorized("missing Authorization header (signed ticks are not enabled)")
            hook.check_headers(headers, enabled=True)
            signed = {name: headers.get(name.lower(), "") for name in SIGNED_HEADERS}
            return Credentials(Scheme.HMAC, verifier=self._verifier, signed=signed)
        if self._oidc is None:
            raise Unauthorized("OIDC tokens are not accepted for ticks here")
        identity = self._oidc.identity(headers)
        return Credentials(Scheme.OIDC, identity, scheduled=scheduled_time(headers))
