"""Classify a ``PushMessage`` into a typed event. Pure: no I/O.

Recognised, in this order:
- a GCS notification (attributes ``eventType``, ``bucketId``, ``objectId``, ``objectGeneration``)
  or a storage CloudEvent;
- any other CloudEvent but ``messagePublished`` is an ``OtherEvent``, routed by its type;
- a job: attribute ``job_kind`` (the jobs topic; ``consumer.jobs.topic`` checks the rest);
- a scheduler tick: attribute ``task``, or a JSON object in the data with a ``task`` field;
- a deploy: attribute ``event=deploy``, or a JSON object in the data with ``"event": "deploy"``;
- anything else is an ``OtherEvent``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from consumer.errors import InvalidEvent
from consumer.wire.envelope import MESSAGE_PUBLISHED, STORAGE_TYPE_PREFIX
from consumer.wire.events import (
    DeployEvent,
    Event,
    JobEvent,
    OtherEvent,
    StorageEvent,
    StorageEventType,
    TickEvent,
)
from consumer.wire.int64 import NotInt64, int64_text
from consumer.wire.json_limits import DEFAULT_MAX_NODES, too_many_values
from consumer.wire.message import PushMessage
from consumer.wire.schedule import Schedule, ScheduleError, as_schedule
from consumer.wire.text import is_storable

ScheduleLookup = Callable[[str], Schedule | int]
"""A task's schedule; a bare number is a period in seconds (as lookups were written before)."""

CLOUDEVENT_STORAGE_TYPES = {
    STORAGE_TYPE_PREFIX + "finalized": StorageEventType.OBJECT_FINALIZE,
    STORAGE_TYPE_PREFIX + "deleted": StorageEventType.OBJECT_DELETE,
    STORAGE_TYPE_PREFIX + "archived": StorageEventType.OBJECT_ARCHIVE,
    STORAGE_TYPE_PREFIX + "metadataUpdated": StorageEventType.OBJECT_METADATA_UPDATE,
}
MAX_NAME_LENGTH = 200
MAX_OBJECT_NAME_BYTES = 1024
GCS_ATTRIBUTES = (
    "eventType", "bucketId", "objectId", "objectGeneration", "payloadFormat",
    "notificationConfig", "eventTime", "overwroteGeneration", "overwrittenByGeneration",
)  # fmt: skip
CANONICAL_GCS = {name.lower(): name for name in GCS_ATTRIBUTES}
JOB_KIND = "job_kind"
JOB_ATTRIBUTES = ("key", "run_at", "priority", "max_attempts", "lock_key", "group", "debounce_key")
"""Optional attributes of a jobs-topic message, each spelled ``job_<name>``."""


def classify(
    message: PushMessage, schedule_of: ScheduleLookup, max_json_nodes: int = DEFAULT_MAX_NODES
) -> Event:
    """Return the typed event for ``message``; raise ``InvalidEvent`` if it is one of ours but
    incomplete (a tick without a task name, a deploy without a release...), or if its data holds
    more than ``max_json_nodes`` JSON values (``CONSUMER_MAX_JSON_NODES``: it bounds a worker's
    memory, json_limits)."""
    if message.cloudevent is not None and message.cloudevent.type in CLOUDEVENT_STORAGE_TYPES:
        return _storage_from_cloudevent(message, max_json_nodes)
    if message.cloudevent is not None and message.cloudevent.type != MESSAGE_PUBLISHED:
        return OtherEvent(message=message)  # its type routes it, not what its data looks like
    attributes = message.attributes
    if _gcs_attributes(attributes):
        return _storage_from_notification(message, max_json_nodes)
    if JOB_KIND in attributes:  # before the data is read: a job's payload is the job's own
        return _job(message)
    data = _json_object(message.data, max_json_nodes)
    if "task" in attributes or "task" in data:
        return _tick(message, data, schedule_of)
    if attributes.get("event") == "deploy" or data.get("event") == "deploy":
        return _deploy(message, data)
    return OtherEvent(message=message)


def _gcs_attributes(attributes: Mapping[str, str]) -> dict[str, str]:
    """The GCS notification attributes under their canonical names, or ``{}``. Unwrapped push
    delivers attributes as HTTP headers, whose names arrive lowercased."""
    named = ((CANONICAL_GCS.get(key.lower()), value) for key, value in attributes.items())
    found = {name: value for name, value in named if name}
    return found if "eventType" in found and "bucketId" in found else {}


def _storage_from_notification(message: PushMessage, max_json_nodes: int) -> StorageEvent:
    attributes = _gcs_attributes(message.attributes)
    try:
        event_type = StorageEventType(attributes["eventType"])
    except ValueError:
        raise InvalidEvent(f"unknown storage eventType {attributes['eventType']!r}") from None
    json_api = attributes.get("payloadFormat") == "JSON_API_V1"
    resource = _resource(message.data, max_json_nodes) if json_api else {}
    return StorageEvent(
        event_type=event_type,
        bucket=_name(attributes.get("bucketId"), "bucketId"),
        name=_object_name(attributes.get("objectId"), "objectId"),
        generation=_digits(attributes.get("objectGeneration"), "objectGeneration"),
        metageneration=_optional_digits(resource.get("metageneration"), "metageneration"),
        resource=resource,
        message=message,
        continuation=_optional_name(message.attributes.get("continuation"), "continuation"),
    )


def _storage_from_cloudevent(message: PushMessage, max_json_nodes: int) -> StorageEvent:
    assert message.cloudevent is not None
    resource = _resource(message.data, max_json_nodes)
    if not resource:
        raise InvalidEvent("storage CloudEvent data must be the object resource")
    return StorageEvent(
        event_type=CLOUDEVENT_STORAGE_TYPES[message.cloudevent.type],
        bucket=_name(resource.get("bucket"), "bucket"),
        name=_object_name(resource.get("name"), "name"),
        generation=_digits(resource.get("generation"), "generation"),
        metageneration=_optional_digits(resource.get("metageneration"), "metageneration"),
        resource=resource,
        message=message,
    )


def _tick(message: PushMessage, data: Mapping[str, Any], schedule_of: ScheduleLookup) -> TickEvent:
    """A tick's slot is the latest scheduled fire time at or before its ``publishTime``."""
    task = _name(message.attributes.get("task") or data.get("task"), "task")
    schedule = as_schedule(schedule_of(task))
    try:
        slot = schedule.slot_of(message.publish_time)
    except ScheduleError as exc:  # no fire time within 50 years of publishTime
        raise InvalidEvent(f"'task' {task!r}: {exc}") from None
    return TickEvent(
        task=task,
        slot=slot,
        schedule=schedule,
        payload=data,
        message=message,
        continuation=_optional_name(message.attributes.get("continuation"), "continuation"),
        run_now=_optional_name(message.attributes.get("run_now"), "run_now"),
    )


def _job(message: PushMessage) -> JobEvent:
    """The kind and key become names in keys (checked here: a 400 for one that cannot be
    stored); run-at, priority and max attempts are the jobs feature's to check."""
    attributes = message.attributes
    named = ((name, attributes.get(f"job_{name}")) for name in JOB_ATTRIBUTES)
    found = {name: value for name, value in named if value is not None}
    if "key" in found:
        found["key"] = _name(found["key"], "job_key")
    return JobEvent(_name(attributes[JOB_KIND], JOB_KIND), message, found)


def _deploy(message: PushMessage, data: Mapping[str, Any]) -> DeployEvent:
    fields = {**message.attributes, **{k: v for k, v in data.items() if isinstance(v, str)}}
    release = fields.get("release") or fields.get("version")
    return DeployEvent(
        service=_name(fields.get("service"), "service"),
        release=_name(release, "release"),
        environment=_optional_name(fields.get("environment"), "environment"),
        commit=_optional_name(fields.get("commit"), "commit"),
        message=message,
    )


def _json_object(data: bytes, limit: int, **options: Any) -> dict[str, Any]:
    """The data as a JSON object, or ``{}`` when it is not one (ticks may carry no data)."""
    if not data or data.lstrip()[:1] != b"{":
        return {}
    if too_many_values(data, limit):  # bounds a worker's memory (json_limits)
        raise InvalidEvent(f"message data has more than {limit} JSON values")
    try:
        value = json.loads(data, **options)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _resource(data: bytes, limit: int) -> dict[str, Any]:
    """An object resource: numbers with a fraction or exponent kept exact (``Decimal``), so an
    int64 written as ``96883251.0`` is read as what was sent, never a rounded float."""
    return _json_object(data, limit, parse_float=Decimal)


def _name(value: Any, label: str, limit: int = MAX_NAME_LENGTH) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidEvent(f"'{label}' is missing or empty")
    if len(value) > limit:
        raise InvalidEvent(f"'{label}' is longer than {limit} characters")
    if not is_storable(value):  # names become idempotency keys: text columns
        raise InvalidEvent(f"'{label}' contains a NUL or an unpaired surrogate character")
    return value.strip()


def _object_name(value: Any, label: str) -> str:
    """GCS object names are kept exactly (spaces are legal); at most 1024 bytes of UTF-8."""
    _name(value, label)
    if len(value.encode("utf-8")) > MAX_OBJECT_NAME_BYTES:
        raise InvalidEvent(f"'{label}' is longer than {MAX_OBJECT_NAME_BYTES} bytes")
    return str(value)


def _optional_name(value: Any, label: str) -> str:
    return "" if value in (None, "") else _name(value, label)


def _digits(value: Any, label: str) -> str:
    """Generations are int64: a decimal string or, in JSON, a number (proto3 allows both)."""
    try:
        return int64_text(value, label)
    except NotInt64 as exc:
        raise InvalidEvent(str(exc)) from None


def _optional_digits(value: Any, label: str) -> str:
    return "" if value in (None, "") else _digits(value, label)
