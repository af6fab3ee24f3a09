"""``POST /hooks/deploy``: a CI deploy hook (HMAC-signed; the view is in ``consumer.http.app``):
what its headers alone must show (``check_headers``, run by the header gate before the body is
read), and parsing its body.

The body is ``{"service": ..., "release": ... (or "version"), "environment"?, "commit"?}``. It is
read only after the signature checks out, then turned into the same ``PushMessage`` shape a
Pub/Sub deploy has (attribute ``event=deploy``, canonical JSON data), so classification, the
idempotency key (service + release), replay and the outcome table are the push path's own.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import datetime

from consumer.auth.signature import SIGNATURE_HEADER, TIMESTAMP, TIMESTAMP_HEADER
from consumer.errors import BodyTooLarge, InvalidEvent, Unauthorized
from consumer.wire.classify import ScheduleLookup, classify
from consumer.wire.envelope import Limits, load_json_object
from consumer.wire.events import DeployEvent
from consumer.wire.message import Format, PushMessage

HOOK_MAX_BYTES = 64 * 1024
HOOK_SUBSCRIPTION = "hooks/deploy"
FIELDS = ("service", "release", "version", "environment", "commit")


def check_headers(headers: Mapping[str, str], enabled: bool) -> None:
    """Refuse a hook its headers condemn, before its body is read: the hook disabled (no
    secrets), a signature header missing, a malformed timestamp (``Unauthorized``), a declared
    size over ``HOOK_MAX_BYTES`` (``BodyTooLarge``). The signature covers the body, so it and
    the timestamp's window are checked by the view once the body is in."""
    if not enabled:
        raise Unauthorized("deploy hook is disabled: no secrets are configured")
    lowered = {key.lower(): value.strip() for key, value in headers.items()}
    if not lowered.get(SIGNATURE_HEADER.lower()):
        raise Unauthorized(f"missing {SIGNATURE_HEADER} header")
    if not TIMESTAMP.fullmatch(lowered.get(TIMESTAMP_HEADER.lower(), "")):
        raise Unauthorized("malformed timestamp: expected Unix seconds")
    declared = lowered.get("content-length", "0")
    if declared.isascii() and declared.isdigit() and int(declared) > HOOK_MAX_BYTES:
        raise BodyTooLarge(f"hook body is over {HOOK_MAX_BYTES} bytes")


def parse_hook(body: bytes, received: datetime, schedule_of: ScheduleLookup) -> DeployEvent:
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
    event = classify(message, schedule_of)
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
