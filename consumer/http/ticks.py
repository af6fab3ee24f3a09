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
from dataclasses import replace

from consumer.auth.certs import CachedCerts
from consumer.config.settings import Settings
from consumer.http.callers import CallerGate
from consumer.http.credentials import Credentials, Scheme
from consumer.ticks.hook import scheduled_time


class TickGate:
    """The front door's checks of a tick (``consumer.http.gate``), before its body is read: the
    scheme decided once (``consumer.http.callers``), and an OIDC tick's scheduled time read."""

    def __init__(self, callers: CallerGate) -> None:
        self.callers = callers

    @classmethod
    def of(cls, settings: Settings, certs: CachedCerts | None = None) -> TickGate:
        """``certs``: the push authenticator's cache when it has one (the same Google keys)."""
        disabled = "tick endpoint is disabled: no credentials are configured"
        return cls(CallerGate.of(settings.tick_hook, settings, certs, "ticks", disabled))

    def check(self, headers: Mapping[str, str]) -> Credentials:
        """The caller's credentials: a token is OIDC (verified here; its slot clock the
        ``X-CloudScheduler-ScheduleTime`` header, 400 when malformed), anything else must be
        signed (headers checked here, the signature over the body by the handler).
        ``headers``: the request's one view, names lower-case."""
        credentials = self.callers.check(headers)
        if credentials.scheme is Scheme.OIDC:
            return replace(credentials, scheduled=scheduled_time(headers))
        return credentials
