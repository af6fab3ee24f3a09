"""Turn a push request (headers + body) into one ``PushMessage``. Pure: no I/O, no Flask.

Formats: the wrapped push body, unwrapped push with ``write_metadata`` headers, and CloudEvents in
binary and structured mode. The shape is checked before anything is read; every problem raises
``InvalidEnvelope``, which the view turns into a 400.

A CloudEvent of any type is accepted: ``messagePublished`` carries a push body, every other type
(storage, other Eventarc sources, custom ones) its own data, kept as the message's data.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from consumer.errors import InvalidEnvelope
from consumer.wire.json_limits import DEFAULT_MAX_NODES, too_many_values
from consumer.wire.message import CloudEventMeta, Format, PushMessage
from consumer.wire.text import is_storable
from consumer.wire.timeutil import parse_rfc3339

MESSAGE_PUBLISHED = "google.cloud.pubsub.topic.v1.messagePublished"
STORAGE_TYPE_PREFIX = "google.cloud.storage.object.v1."
STORAGE_SUFFIXES = ("finalized", "deleted", "archived", "metadataUpdated")
CLOUDEVENT_TYPES = frozenset(
    {MESSAGE_PUBLISHED, *(STORAGE_TYPE_PREFIX + s for s in STORAGE_SUFFIXES)}
)
"""The types whose data has a shape we read; any other type's data is kept as it is."""
PUBSUB_HEADER = "x-goog-pubsub-"
# Slots are floored from the Unix epoch; earlier times can floor below year 1 and crash.
EARLIEST_PUBLISH_TIME = datetime(1970, 1, 1, tzinfo=UTC)
# Headers a proxy, the load balancer or HTTP itself adds; in unwrapped mode every other header
# is a message attribute.
TRANSPORT_HEADERS = frozenset(
    {
        "accept", "accept-encoding", "authorization", "connection", "content-length",
        "content-type", "forwarded", "from", "host", "te", "traceparent", "tracestate",
        "transfer-encoding", "upgrade", "user-agent", "via", "x-cloud-trace-context",
        "x-request-id", "cookie", "expect", "keep-alive",
    }
)  # fmt: skip
MAX_ID_LENGTH = 256
INT32_MAX = 2**31 - 1
DECIMAL = re.compile(r"[0-9]{1,20}")
MAX_SUBSCRIPTION_LENGTH = 512
MAX_TYPE_LENGTH = 256


@dataclass(frozen=True)
class Limits:
    """Shape limits checked while parsing."""

    max_attributes: int = 256
    max_json_depth: int = 64
    max_json_nodes: int = DEFAULT_MAX_NODES


def parse_push(headers: Mapping[str, str], body: bytes, limits: Limits = Limits()) -> PushMessage:
    """Parse any supported push format; raise ``InvalidEnvelope`` on anything else."""
    return _storable(_parse_any(headers, body, limits))


def _parse_any(headers: Mapping[str, str], body: bytes, limits: Limits) -> PushMessage:
    lowered = {key.lower(): value for key, value in headers.items()}
    if "ce-type" in lowered:
        return _parse_binary_cloudevent(lowered, body, limits)
    if f"{PUBSUB_HEADER}message-id" in lowered:
        return _parse_unwrapped(lowered, body, limits)
    document = load_json_object(body, limits)
    if "specversion" in document:
        return _parse_structured_cloudevent(document, limits)
    return parse_wrapped(document, limits)


def load_json_object(body: bytes, limits: Limits) -> dict[str, Any]:
    """Decode a JSON object body, bounding its values (before parsing) and its nesting depth."""
    if not body.strip():
        raise InvalidEnvelope("empty body: expected a JSON push envelope")
    if too_many_values(body, limits.max_json_nodes):
        raise InvalidEnvelope(f"body has more than {limits.max_json_nodes} JSON values")
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidEnvelope(f"body is not valid JSON: {exc}") from None
    except RecursionError:
        raise InvalidEnvelope("body is nested too deeply") from None
    if not isinstance(document, dict):
        raise InvalidEnvelope("body must be a JSON object")
    if _depth(document) > limits.max_json_depth:
        raise InvalidEnvelope(f"body is nested deeper than {limits.max_json_depth} levels")
    return document


def parse_wrapped(document: Mapping[str, Any], limits: Limits) -> PushMessage:
    """The standard push body: ``{"message": {...}, "subscription": ..., "deliveryAttempt"?}``."""
    message = document.get("message")
    if not isinstance(message, dict):
        raise InvalidEnvelope("'message' must be a JSON object")
    return PushMessage(
        message_id=_either(message, "messageId", "message_id"),
        publish_time=_timestamp(_either(message, "publishTime", "publish_time")),
        data=_decode_data(message.get("data")),
        attributes=_attributes(message.get("attributes"), limits),
        subscription=_optional_str(document, "subscription"),
        ordering_key=_optional_str(message, "orderingKey"),
        delivery_attempt=_delivery_attempt(document.get("deliveryAttempt")),
        format=Format.WRAPPED,
    )


def _parse_unwrapped(headers: dict[str, str], body: bytes, limits: Limits) -> PushMessage:
    attributes = {
        key: value
        for key, value in headers.items()
        if key not in TRANSPORT_HEADERS
        and not key.startswith((PUBSUB_HEADER, "x-forwarded-", "ce-"))
    }
    return PushMessage(
        message_id=_required_header(headers, "message-id"),
        publish_time=_timestamp(_required_header(headers, "publish-time")),
        data=body,
        attributes=_attributes(attributes, limits),
        subscription=headers.get(f"{PUBSUB_HEADER}subscription-name", ""),
        ordering_key=headers.get(f"{PUBSUB_HEADER}ordering-key", ""),
        format=Format.UNWRAPPED,
    )


def _parse_binary_cloudevent(headers: dict[str, str], body: bytes, limits: Limits) -> PushMessage:
    meta = _cloudevent_meta({key[3:]: value for key, value in headers.items() if key[:3] == "ce-"})
    if meta.type == MESSAGE_PUBLISHED:
        document = load_json_object(body, limits)
        return _from_message_published(meta, document, limits, Format.CLOUDEVENT_BINARY)
    return _data_cloudevent(meta, body, Format.CLOUDEVENT_BINARY)


def _parse_structured_cloudevent(document: Mapping[str, Any], limits: Limits) -> PushMessage:
    meta = _cloudevent_meta(document)
    data: Any = document.get("data")
    if "data_base64" in document:
        data = _decode_data(document["data_base64"])
        if meta.type == MESSAGE_PUBLISHED:
            data = load_json_object(data, limits)
    if meta.type == MESSAGE_PUBLISHED:
        if not isinstance(data, dict):
            raise InvalidEnvelope("messagePublished data must be a push body object")
        return _from_message_published(meta, data, limits, Format.CLOUDEVENT_STRUCTURED)
    if not isinstance(data, bytes):
        data = b"" if data is None else json.dumps(data).encode()
    return _data_cloudevent(meta, data, Format.CLOUDEVENT_STRUCTURED)


def _from_message_published(
    meta: CloudEventMeta, document: Mapping[str, Any], limits: Limits, fmt: Format
) -> PushMessage:
    return replace(parse_wrapped(document, limits), format=fmt, cloudevent=meta)


def _data_cloudevent(meta: CloudEventMeta, body: bytes, fmt: Format) -> PushMessage:
    """Any CloudEvent but ``messagePublished``: its data, and its time as the publish time."""
    if not meta.time:
        raise InvalidEnvelope("CloudEvent attribute 'time' is missing (it is the publish time)")
    return PushMessage(
        message_id=meta.id,
        publish_time=_timestamp(meta.time),
        data=body,
        format=fmt,
        cloudevent=meta,
    )


def _cloudevent_meta(fields: Mapping[str, Any]) -> CloudEventMeta:
    values = {}
    for name in ("id", "source", "type", "specversion"):
        value = fields.get(name)
        if not isinstance(value, str) or not value:
            raise InvalidEnvelope(f"CloudEvent attribute '{name}' is missing")
        values[name] = value
    if len(values["type"]) > MAX_TYPE_LENGTH:
        raise InvalidEnvelope(f"CloudEvent type is longer than {MAX_TYPE_LENGTH} characters")
    extras = {name: fields.get(name) or "" for name in ("subject", "time")}
    if not all(isinstance(value, str) for value in extras.values()):
        raise InvalidEnvelope("CloudEvent 'subject' and 'time' must be strings")
    return CloudEventMeta(**values, **extras)


def _either(message: Mapping[str, Any], camel: str, snake: str) -> str:
    """Google sends both spellings, but not always: camelCase first, then snake_case."""
    for key in (camel, snake):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    raise InvalidEnvelope(f"message.{camel} is missing or not a string")


def _timestamp(text: str) -> datetime:
    try:
        moment = parse_rfc3339(text)
    except (ValueError, OverflowError) as exc:  # overflow: an offset pushing past year 1 or 9999
        raise InvalidEnvelope(f"invalid publish time: {exc}") from None
    if moment < EARLIEST_PUBLISH_TIME:
        raise InvalidEnvelope("publish time is before 1970 (schedule slots count from the epoch)")
    return moment


def _decode_data(data: Any) -> bytes:
    if data is None:
        return b""
    if not isinstance(data, str):
        raise InvalidEnvelope("message.data must be a base64 string")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidEnvelope("message.data is not valid base64") from None


def _attributes(attributes: Any, limits: Limits) -> dict[str, str]:
    if attributes is None:
        return {}
    if not isinstance(attributes, dict):
        raise InvalidEnvelope("message.attributes must be a JSON object")
    if len(attributes) > limits.max_attributes:
        raise InvalidEnvelope(f"more than {limits.max_attributes} attributes")
    if not all(isinstance(value, str) for value in attributes.values()):
        raise InvalidEnvelope("attribute values must be strings")
    return dict(attributes)


def _optional_str(container: Mapping[str, Any], key: str) -> str:
    value = container.get(key, "")
    if not isinstance(value, str):
        raise InvalidEnvelope(f"'{key}' must be a string")
    return value


def _delivery_attempt(value: Any) -> int | None:
    """A JSON number or a decimal string (proto3's JSON mapping allows both for integers), read
    exactly: no float, no sign, no digits of other scripts, at most int32's range."""
    if value is None:
        return None
    if isinstance(value, str) and DECIMAL.fullmatch(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidEnvelope(
            f"'deliveryAttempt' must be a whole number or a decimal string, got {_kind(value)}"
        )
    if not 0 <= value <= INT32_MAX:
        raise InvalidEnvelope(f"'deliveryAttempt' must be 0..{INT32_MAX}")
    return value


def _kind(value: Any) -> str:
    if isinstance(value, str):
        return "a string that is not a decimal number"
    return "a boolean" if isinstance(value, bool) else type(value).__name__


def _required_header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(PUBSUB_HEADER + name, "")
    if not value:
        raise InvalidEnvelope(f"header {PUBSUB_HEADER}{name} is missing")
    return value


def _storable(message: PushMessage) -> PushMessage:
    """Refuse text the inbox cannot store: PostgreSQL text holds no NUL, and a lone surrogate
    (legal in JSON as ``\\ud800``) cannot be encoded at all."""
    texts = [message.message_id, message.subscription, message.ordering_key]
    texts += [*message.attributes, *message.attributes.values()]
    texts += list(vars(message.cloudevent).values()) if message.cloudevent else []
    if not all(is_storable(value) for value in texts):
        raise InvalidEnvelope("a text field contains a NUL or an unpaired surrogate character")
    # Ids become part of idempotency keys, which an index must hold (PostgreSQL: ~2.7 kB).
    for label, value, limit in (
        ("messageId", message.message_id, MAX_ID_LENGTH),
        ("subscription", message.subscription, MAX_SUBSCRIPTION_LENGTH),
    ):
        if len(value) > limit:
            raise InvalidEnvelope(f"{label} is longer than {limit} characters")
    return message


def _depth(value: Any) -> int:
    """Nesting depth without recursion, so a hostile body cannot blow the stack."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        children = (
            node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        )
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return deepest
