"""Classify a ``PushMessage`` into a typed event. Pure: no I/O.

Recognised, in this order:
- a GCS notification (attributes ``eventType``, ``bucketId``, ``objectId``, ``objectGeneration``)
  or a storage CloudEvent;
- a scheduler tick: attribute ``task``, or a JSON object in the data with a ``task`` field;
- a deploy: attribute ``event=deploy``, or a JSON object in the data with ``"event": "deploy"``;
- anything else is an ``OtherEvent``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from consumer.envelope import STORAGE_TYPE_PREFIX, is_storable
from consumer.errors import InvalidEvent
from consumer.events import (
    DeployEvent,
    Event,
    OtherEvent,
    StorageEvent,
    StorageEventType,
    TickEvent,
)
from consumer.message import PushMessage
from consumer.timeutil import floor_to_period

PeriodLookup = Callable[[str], int]

CLOUDEVENT_STORAGE_TYPES = {
    STORAGE_TYPE_PREFIX + "finalized": StorageEventType.OBJECT_FINALIZE,
    STORAGE_TYPE_PREFIX + "deleted": StorageEventType.OBJECT_DELETE,
    STORAGE_TYPE_PREFIX + "archived": StorageEventType.OBJECT_ARCHIVE,
    STORAGE_TYPE_PREFIX + "metadataUpdated": StorageEventType.OBJECT_METADATA_UPDATE,
}
MAX_NAME_LENGTH = 200


def classify(message: PushMessage, period_of: PeriodLookup) -> Event:
    """Return the typed event for ``message``; raise ``InvalidEvent`` if it is one of ours but
    incomplete (a tick without a task name, a deploy without a release...)."""
    if message.cloudevent is not None and message.cloudevent.type in CLOUDEVENT_STORAGE_TYPES:
        return _storage_from_cloudevent(message)
    attributes = message.attributes
    if "eventType" in attributes and "bucketId" in attributes:
        return _storage_from_notification(message)
    data = _json_object(message.data)
    if "task" in attributes or "task" in data:
        return _tick(message, data, period_of)
    if attributes.get("event") == "deploy" or data.get("event") == "deploy":
        return _deploy(message, data)
    return OtherEvent(message=message)


def _storage_from_notification(message: PushMessage) -> StorageEvent:
    attributes = message.attributes
    try:
        event_type = StorageEventType(attributes["eventType"])
    except ValueError:
        raise InvalidEvent(f"unknown storage eventType {attributes['eventType']!r}") from None
    resource = (
        _json_object(message.data) if attributes.get("payloadFormat") == "JSON_API_V1" else {}
    )
    return StorageEvent(
        event_type=event_type,
        bucket=_name(attributes.get("bucketId"), "bucketId"),
        name=_name(attributes.get("objectId"), "objectId", limit=1024),
        generation=_digits(attributes.get("objectGeneration"), "objectGeneration"),
        metageneration=_optional_digits(resource.get("metageneration"), "metageneration"),
        resource=resource,
        message=message,
    )


def _storage_from_cloudevent(message: PushMessage) -> StorageEvent:
    assert message.cloudevent is not None
    resource = _json_object(message.data)
    if not resource:
        raise InvalidEvent("storage CloudEvent data must be the object resource")
    return StorageEvent(
        event_type=CLOUDEVENT_STORAGE_TYPES[message.cloudevent.type],
        bucket=_name(resource.get("bucket"), "bucket"),
        name=_name(resource.get("name"), "name", limit=1024),
        generation=_digits(resource.get("generation"), "generation"),
        metageneration=_optional_digits(resource.get("metageneration"), "metageneration"),
        resource=resource,
        message=message,
    )


def _tick(message: PushMessage, data: Mapping[str, Any], period_of: PeriodLookup) -> TickEvent:
    task = _name(message.attributes.get("task") or data.get("task"), "task")
    period = period_of(task)
    return TickEvent(
        task=task,
        slot=floor_to_period(message.publish_time, period),
        period_seconds=period,
        payload=data,
        message=message,
    )


def _deploy(message: PushMessage, data: Mapping[str, Any]) -> DeployEvent:
    fields = {**message.attributes, **{k: v for k, v in data.items() if isinstance(v, str)}}
    release = fields.get("release") or fields.get("version")
    return DeployEvent(
        service=_name(fields.get("service"), "service"),
        release=_name(release, "release"),
        environment=fields.get("environment", ""),
        commit=fields.get("commit", ""),
        message=message,
    )


def _json_object(data: bytes) -> dict[str, Any]:
    """The data as a JSON object, or ``{}`` when it is not one (ticks may carry no data)."""
    if not data or data.lstrip()[:1] != b"{":
        return {}
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _name(value: Any, label: str, limit: int = MAX_NAME_LENGTH) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidEvent(f"'{label}' is missing or empty")
    if len(value) > limit:
        raise InvalidEvent(f"'{label}' is longer than {limit} characters")
    if not is_storable(value):  # names become idempotency keys: text columns
        raise InvalidEvent(f"'{label}' contains a NUL or an unpaired surrogate character")
    return value.strip()


def _digits(value: Any, label: str) -> str:
    if not isinstance(value, str) or not value.isdigit():
        raise InvalidEvent(f"'{label}' must be a decimal string")
    return value


def _optional_digits(value: Any, label: str) -> str:
    return "" if value in (None, "") else _digits(value, label)
