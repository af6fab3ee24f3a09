"""``POST /hooks/deploy``: a CI deploy hook, HMAC-signed, joining the same inbox flow as a push.

The body is ``{"service": ..., "release": ... (or "version"), "environment"?, "commit"?}``. It is
read only after the signature checks out, then turned into the same ``PushMessage`` shape a
Pub/Sub deploy has (attribute ``event=deploy``, canonical JSON data), so classification, the
idempotency key (service + release), replay and the outcome table are the push path's own.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from datetime import datetime

from flask import Response, jsonify, request
from werkzeug.exceptions import RequestEntityTooLarge

from consumer import metrics
from consumer.classify import PeriodLookup, classify
from consumer.deploy.signature import Verifier
from consumer.dispatch import Dispatcher
from consumer.envelope import Limits, load_json_object
from consumer.errors import BodyTooLarge, ConsumerError, InvalidEvent
from consumer.events import DeployEvent
from consumer.message import Format, PushMessage
from consumer.outcomes import Outcome, from_error
from consumer.settings import Settings

log = logging.getLogger("consumer.deploy.hook")

HOOK_MAX_BYTES = 64 * 1024
HOOK_SUBSCRIPTION = "hooks/deploy"
FIELDS = ("service", "release", "version", "environment", "commit")


def parse_hook(body: bytes, received: datetime, period_of: PeriodLookup) -> DeployEvent:
    """The deploy event a verified hook body describes; ``InvalidEvent``/``InvalidEnvelope``
    (400) when it does not describe one."""
    message = PushMessage(
        message_id=f"hook-{uuid.uuid4().hex}",
        publish_time=received,
        data=json.dumps(_canonical(body), sort_keys=True).encode(),
        attributes={"event": "deploy"},
        subscription=HOOK_SUBSCRIPTION,
        format=Format.DEPLOY_HOOK,
    )
    event = classify(message, period_of)
    if not isinstance(event, DeployEvent):  # the canonical message always classifies as deploy
        raise InvalidEvent("not a deploy")
    return event


def _canonical(body: bytes) -> dict[str, str]:
    """The deploy fields of the body as the Pub/Sub path reads them (and nothing else, so a
    stray ``task`` field cannot turn a hook into a tick, now or on replay)."""
    if not body.strip():
        raise InvalidEvent("empty body: expected {service, release, environment?, commit?}")
    document = load_json_object(body, Limits())
    for name in FIELDS:
        if name in document and not isinstance(document[name], str):
            raise InvalidEvent(f"'{name}' must be a string")
    fields = {name: document.get(name, "").strip() for name in FIELDS}
    fields["release"] = fields["release"] or fields["version"]
    return {"event": "deploy", **{k: v for k, v in fields.items() if v and k != "version"}}


def hook_view(settings: Settings, dispatcher: Dispatcher) -> Callable[[], Response]:
    """The view for ``POST /hooks/deploy``: verify, parse, then the dispatcher decides."""
    verifier = Verifier(settings.deploy_hook_secrets, settings.deploy_hook_tolerance_seconds)

    def deploy_hook() -> Response:
        started, event = time.monotonic(), None
        try:
            body = _body()
            verifier.verify(dict(request.headers), body, dispatcher.clock().timestamp())
            event = parse_hook(body, dispatcher.clock(), dispatcher.registry.period_of)
            outcome = dispatcher.handle(event)
        except ConsumerError as error:
            outcome = from_error(error)
        _log_decision(outcome, event, time.monotonic() - started)
        response = jsonify(outcome.body())
        response.status_code = outcome.http_status
        return response

    return deploy_hook


def _body() -> bytes:
    """The raw body, refused over ``HOOK_MAX_BYTES`` (an announcement is a few lines); a chunked
    body is read only one byte past the limit, not up to the push limit."""
    if (request.content_length or 0) > HOOK_MAX_BYTES:
        raise BodyTooLarge(f"hook body is over {HOOK_MAX_BYTES} bytes")
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


def _log_decision(outcome: Outcome, event: DeployEvent | None, seconds: float) -> None:
    metrics.record(outcome, seconds)
    log.info(
        "deploy hook decided",
        extra={
            "route": HOOK_SUBSCRIPTION,
            "message_id": event.message.message_id if event else None,
            "key": outcome.key,
            "outcome": outcome.kind.value,
            "status": outcome.http_status,
            "attempt": outcome.details.get("attempt"),
            "duration_ms": round(seconds * 1000, 1),
            "error": outcome.details.get("error"),
        },
    )
