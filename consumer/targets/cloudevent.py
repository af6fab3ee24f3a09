"""What a target receives: the event as a CloudEvent in binary mode (``ce-*`` headers, the
event's JSON as the body), its ``Idempotency-Key`` and the ``traceparent``. Pure but for the
random span id of the call.

The types: ``com.consumer.tick``, ``com.consumer.deploy``, ``com.consumer.job``; storage events
as Eventarc sends them (``google.cloud.storage.object.v1.finalized`` ...); other messages as
``google.cloud.pubsub.topic.v1.messagePublished`` (the body a wrapped push body); a CloudEvent
that came in keeps its own attributes and data. ``ce-id`` is the idempotency key, so every repeat
of one event carries the same id (a forwarded CloudEvent keeps its own id).
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from consumer.errors import Permanent
from consumer.jobs.model import Job
from consumer.observe import tracing
from consumer.wire import text
from consumer.wire.events import (
    DeployEvent,
    Event,
    JobEvent,
    OtherEvent,
    StorageEvent,
    TickEvent,
)
from consumer.wire.message import PushMessage
from consumer.wire.timeutil import parse_rfc3339

TICK_TYPE = "com.consumer.tick"
DEPLOY_TYPE = "com.consumer.deploy"
JOB_TYPE = "com.consumer.job"
MESSAGE_TYPE = "google.cloud.pubsub.topic.v1.messagePublished"
STORAGE_TYPES = {
    "OBJECT_FINALIZE": "google.cloud.storage.object.v1.finalized",
    "OBJECT_DELETE": "google.cloud.storage.object.v1.deleted",
    "OBJECT_ARCHIVE": "google.cloud.storage.object.v1.archived",
    "OBJECT_METADATA_UPDATE": "google.cloud.storage.object.v1.metadataUpdated",
}
STORAGE_SOURCE = "//storage.googleapis.com/projects/_/buckets/"
JSON = "application/json"
CLAIM_HEADER = "X-Consumer-Claim"
"""A job's call carries the claim it runs under: the target's reports name it
(docs/long-running-jobs.md), and one under an older claim is refused."""
_PLAIN = frozenset(range(0x21, 0x7F)) - {ord('"'), ord("%")}
"""Bytes a CloudEvents HTTP header value carries as they are (its binding's section 3.1.3.2)."""


@dataclass(frozen=True)
class Delivery:
    """One event as a target receives it: the key, the CloudEvent attributes and the body."""

    key: str
    type: str
    source: str
    subject: str
    time: datetime
    body: bytes
    id: str = ""
    """The ``ce-id`` when it is not the key (a forwarded CloudEvent's own)."""
    claim: str = ""
    """A job's claim token (``CLAIM_HEADER``); empty for an event."""

    def headers(self) -> dict[str, str]:
        """The request's headers (auth is added by the caller)."""
        headers = {
            "Content-Type": JSON,
            "ce-specversion": "1.0",
            "ce-id": header_value(self.id or self.key),
            "ce-type": header_value(self.type),
            "ce-source": header_value(self.source),
            "ce-time": rfc3339(self.time),
            "Idempotency-Key": idempotency_key(self.key),
        }
        if self.subject:
            headers["ce-subject"] = header_value(self.subject)
        if self.claim:
            headers[CLAIM_HEADER] = header_value(self.claim)
        parent = traceparent(tracing.current.get())
        if parent:
            headers["traceparent"] = parent
        return headers


def header_value(value: str) -> str:
    """A string as a CloudEvents header value: UTF-8, with space, ``"``, ``%`` and every byte
    outside printable ASCII percent-encoded (so a header is always ASCII and splits back)."""
    return "".join(chr(b) if b in _PLAIN else f"%{b:02X}" for b in value.encode("utf-8"))


def idempotency_key(key: str) -> str:
    """The ``Idempotency-Key`` value: a Structured Field String (RFC 8941 section 3.3.3), the
    key percent-encoded as a CloudEvents header value, ``\\`` escaped, in double quotes."""
    return '"' + header_value(key).replace("\\", "\\\\") + '"'


def traceparent(trace: tracing.Trace | None) -> str:
    """A W3C ``traceparent`` naming this call as a child span of the delivery's trace."""
    if trace is None:
        return ""
    return f"00-{trace.trace_id}-{secrets.token_hex(8)}-{'01' if trace.sampled else '00'}"


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def for_event(event: Event, key: str) -> Delivery:
    """The delivery of ``event`` under its inbox ``key``."""
    if isinstance(event, TickEvent):
        return _tick(event, key)
    if isinstance(event, StorageEvent):
        return _storage(event, key)
    if isinstance(event, DeployEvent):
        return _deploy(event, key)
    return _other(event, key)


def for_job(job: Job, claim: str = "") -> Delivery:
    """A job's delivery, under its idempotency key (``job:<id>`` when it has none), carrying the
    claim it runs under."""
    key = job.idempotency_key or f"job:{job.id}"
    body = {"id": job.id, "kind": job.kind, "payload": job.payload, "attempt": job.attempts}
    when = job.created_at
    return Delivery(key, JOB_TYPE, "/consumer/jobs", job.kind, when, dumps(body), claim=claim)


def _tick(event: TickEvent, key: str) -> Delivery:
    body: dict[str, Any] = {"task": event.task, "slot": rfc3339(event.slot)}
    body["schedule"] = str(event.schedule)
    body |= {"payload": dict(event.payload)} if event.payload else {}
    body |= {"continuation": event.continuation} if event.continuation else {}
    return Delivery(key, TICK_TYPE, "/consumer/ticks", event.task, event.slot, dumps(body))


def _storage(event: StorageEvent, key: str) -> Delivery:
    """As Eventarc sends storage events: the object resource, the bucket in the source. The
    object is the one the attributes named (they keyed the event and picked the target): the
    data may add to them, never contradict them."""
    _agrees(event)
    body: dict[str, Any] = {**dict(event.resource), "bucket": event.bucket, "name": event.name}
    body["generation"] = event.generation
    if event.metageneration:
        body.setdefault("metageneration", event.metageneration)
    source = f"{STORAGE_SOURCE}{event.bucket}"
    kind = STORAGE_TYPES[event.event_type.value]
    subject, when = f"objects/{event.name}", _event_time(event.message)
    return Delivery(key, kind, source, subject, when, dumps(body))


def _agrees(event: StorageEvent) -> None:
    """Refuse (``Permanent``: dead, for an operator to look at) a storage event whose data, or
    whose CloudEvent source and subject, name another object than its identity."""
    named = {"bucket": event.bucket, "name": event.name, "generation": event.generation}
    found = {field: event.resource.get(field) for field in named}
    meta = event.message.cloudevent
    if meta is not None and meta.source.startswith("//storage.googleapis.com/"):
        found["source"], named["source"] = meta.source, f"{STORAGE_SOURCE}{event.bucket}"
    if meta is not None and meta.subject.startswith("objects/"):
        found["subject"], named["subject"] = meta.subject, f"objects/{event.name}"
    for field, value in found.items():
        if value is not None and str(value) != named[field]:
            raise Permanent(
                f"storage event for {event.bucket}/{event.name}#{event.generation}: its"
                f" {field} says {text.storable(str(value), 200)!r}; refused, not sent to a target"
            )


def _deploy(event: DeployEvent, key: str) -> Delivery:
    body = {"service": event.service, "release": event.release}
    body |= {"environment": event.environment, "commit": event.commit}
    when = event.message.publish_time
    return Delivery(key, DEPLOY_TYPE, "/consumer/deploys", event.service, when, dumps(body))


def _other(event: OtherEvent | JobEvent, key: str) -> Delivery:
    """A CloudEvent keeps its own attributes and (JSON) data; any other message (a jobs-topic
    message included) goes as the wrapped push body Eventarc's ``messagePublished`` carries."""
    message, meta = event.message, event.message.cloudevent
    if meta is not None:
        when = _parsed(meta.time) or message.publish_time
        body = message.data if _is_json(message.data) else dumps(_as_base64(message.data))
        return Delivery(key, meta.type, meta.source, meta.subject, when, body, id=meta.id)
    source = f"//pubsub.googleapis.com/{message.subscription or 'unknown-subscription'}"
    return Delivery(key, MESSAGE_TYPE, source, "", message.publish_time, dumps(_wrapped(message)))


def _wrapped(message: PushMessage) -> dict[str, Any]:
    inner = {
        "data": base64.b64encode(message.data).decode("ascii"),
        "attributes": dict(message.attributes),
        "messageId": message.message_id,
        "publishTime": rfc3339(message.publish_time),
    }
    inner |= {"orderingKey": message.ordering_key} if message.ordering_key else {}
    return {"message": inner, "subscription": message.subscription}


def _event_time(message: PushMessage) -> datetime:
    return _parsed(message.attributes.get("eventTime", "")) or message.publish_time


def _parsed(text: str) -> datetime | None:
    """A sender's time, or None when it sent none we can read (the publish time stands in)."""
    try:
        return parse_rfc3339(text) if text else None
    except ValueError:
        return None


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except (ValueError, RecursionError):
        return False
    return bool(data)


def _as_base64(data: bytes) -> Mapping[str, str]:
    return {"data_base64": base64.b64encode(data).decode("ascii")}


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode()
