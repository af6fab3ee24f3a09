"""``POST /ticks/<task>``: a tick from any scheduler that can make an HTTP call (docs/ticks.md).
Pure: no Flask, no I/O but the token check; the handler is in ``consumer.http.deliveries``.

A tick sent here becomes the same ``PushMessage`` a Pub/Sub tick is (attribute ``task``), with
the *scheduled* time as its ``publish_time``, so it is classified, keyed (``tick:TASK:SLOT``),
coalesced and refused from the future exactly as one: a tick of one slot sent through ``/push``
and through ``/ticks`` is one run. Two ways in, chosen per request by what it carries:

- ``Authorization: Bearer <ID token>`` (Cloud Scheduler's HTTP target with an OIDC token): the
  token is checked by the front door, for ``CONSUMER_TICK_HOOK_AUDIENCE`` and one of
  ``CONSUMER_TICK_HOOK_SERVICE_ACCOUNTS``. The slot clock is ``X-CloudScheduler-ScheduleTime``
  (RFC 3339, UTC); without it (a forced run, another OIDC caller), the time we received it.
- otherwise the deploy hook's HMAC scheme (``consumer.deploy.signature``) under
  ``CONSUMER_TICK_HOOK_SECRETS``: the door checks the headers, the handler the signature over the
  body with the scheme and header values the door decided (``consumer.http.credentials``). The slot
  clock is the signed ``X-Consumer-Timestamp``: a forger cannot choose it without a secret, the
  verifier refuses one further than the tolerance from our clock, and a slot that has not begun is
  refused by the dispatcher, unrecorded. The signature covers the body, not the path, so a signed
  body must name its task: a captured request cannot be replayed against another task.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from consumer.auth.certs import CachedCerts
from consumer.auth.oidc import OidcAuthenticator
from consumer.config.settings import Settings
from consumer.config.ticks import TickHookSettings
from consumer.deploy import hook
from consumer.deploy.signature import SIGNATURE_HEADER, TIMESTAMP_HEADER, Verifier
from consumer.errors import BadRequest, InvalidEvent, Unauthorized
from consumer.http.credentials import Credentials, Scheme
from consumer.wire.envelope import Limits, load_json_object
from consumer.wire.message import Format, PushMessage
from consumer.wire.text import is_storable
from consumer.wire.timeutil import parse_rfc3339

PATH = "/ticks/"
SCHEDULE_TIME_HEADER = "X-CloudScheduler-ScheduleTime"
JOB_NAME_HEADER = "X-CloudScheduler-JobName"
SUBSCRIPTION = "ticks"
MAX_HEADER_LENGTH = 500
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


def tick_message(
    task: str, body: bytes, scheduled: datetime, headers: Mapping[str, str], signed: bool
) -> PushMessage:
    """The message a Pub/Sub tick for ``task`` published at ``scheduled`` would be; 400 when the
    body is not a JSON object naming the same task (a ``signed`` one must name it)."""
    document = _document(body)
    named = document.get("task")
    if named is None and signed:
        raise InvalidEvent(
            f'a signed tick\'s body must name its task: {{"task": "{task}"}} '
            "(the signature covers the body, not the path)"
        )
    if named is not None and named != task:
        raise InvalidEvent(f"the body names task {str(named)[:200]!r} but the path names {task!r}")
    attributes = {"task": task}
    if job := _optional_header(headers, JOB_NAME_HEADER):
        attributes["scheduler_job"] = job
    return PushMessage(
        message_id=f"tick-{uuid.uuid4().hex}",
        publish_time=scheduled,
        data=json.dumps({**document, "task": task}, sort_keys=True).encode(),
        attributes=attributes,
        subscription=SUBSCRIPTION,
        format=Format.HTTP_TICK,
    )


def scheduled_time(headers: Mapping[str, str]) -> datetime | None:
    """``X-CloudScheduler-ScheduleTime`` (RFC 3339 UTC, e.g. ``2026-01-05T09:00:00Z``), or None
    when absent; ``BadRequest`` when it is not a time."""
    raw = _optional_header(headers, SCHEDULE_TIME_HEADER)
    if not raw:
        return None
    try:
        return parse_rfc3339(raw)
    except ValueError:
        raise BadRequest(f"{SCHEDULE_TIME_HEADER} is not an RFC 3339 time") from None


def _document(body: bytes) -> dict[str, Any]:
    """The body as a JSON object (Cloud Scheduler may send none: ``{}``)."""
    if not body.strip():
        return {}
    document = load_json_object(body, Limits(max_json_nodes=1000))
    if "task" in document and not isinstance(document["task"], str):
        raise InvalidEvent("'task' must be a string")
    return document


def _optional_header(headers: Mapping[str, str], name: str) -> str:
    value = _header(headers, name)
    if len(value) > MAX_HEADER_LENGTH or not is_storable(value):
        raise BadRequest(f"{name} is longer than {MAX_HEADER_LENGTH} characters or not text")
    return value


def _header(headers: Mapping[str, str], name: str) -> str:
    lowered = name.lower()
    return next((v.strip() for k, v in headers.items() if k.lower() == lowered), "")
