"""Typed events and their idempotency keys (docs/architecture.md §2.1).

A key is derived from what the event *means*, not from its messageId, so that a duplicate with a
fresh messageId (GCS does this) still collides in the inbox.

Distinct events never share a key: every component that another follows is escaped
(``escape``): ``%`` and the separator that ends it are percent-encoded, so the key splits back
into its components. A final component cannot swallow a separator and is kept as is. Names
without an escaped character keep exactly the keys they had before escaping existed, so rows in
a deployed inbox go on deduplicating across the upgrade.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from consumer.wire.int64 import NotInt64, optional_int64
from consumer.wire.message import PushMessage
from consumer.wire.schedule import Schedule

PRODUCER_NAMESPACE = "topic:"
"""The prefix of every job key and lock key a jobs-topic message sets (docs/sources.md): keys
that begin with it are the producers', so trusted code never enqueues under one."""


class Route(StrEnum):
    TICK = "tick"
    STORAGE = "storage"
    DEPLOY = "deploy"
    JOB = "job"
    OTHER = "other"


class StorageEventType(StrEnum):
    """GCS notification event types; CloudEvent types map onto these."""

    OBJECT_FINALIZE = "OBJECT_FINALIZE"
    OBJECT_METADATA_UPDATE = "OBJECT_METADATA_UPDATE"
    OBJECT_DELETE = "OBJECT_DELETE"
    OBJECT_ARCHIVE = "OBJECT_ARCHIVE"


@dataclass(frozen=True)
class TickEvent:
    """A scheduler tick for one task, pinned to the schedule slot it belongs to."""

    task: str
    slot: datetime
    schedule: Schedule
    message: PushMessage
    payload: Mapping[str, Any] = field(default_factory=dict)
    route: Route = Route.TICK
    continuation: str = ""
    """Set on a continuation a budget-bound run published (``consumer.pipeline.continuation``): its
    own key, never stale, and it never advances the task's completed slot."""
    run_now: str = ""
    """Set on an operator's "run now" (attribute ``run_now``): its own key, which no slot's
    key can be, never stale, and it never advances the completed slot."""
    catch_up: bool = False
    """A run the dispatcher makes for a slot missed during an outage: keyed apart from the
    slot's own tick, which the stale rule recorded ``skipped``."""

    @property
    def key(self) -> str:
        task = escape(self.task, ":")
        if self.continuation:
            return f"tick:{task}:continuation:{escape(self.continuation, ':')}"
        if self.run_now:
            return f"tick:{task}:run-now:{escape(self.run_now, ':')}"
        if self.catch_up:
            return f"tick:{task}:catch-up:{self.slot.isoformat()}"
        return f"tick:{task}:{self.slot.isoformat()}"

    @property
    def scheduled(self) -> bool:
        """A slot's own tick (not a continuation, a run now or a catch-up run)."""
        return not (self.continuation or self.run_now or self.catch_up)

    @property
    def name(self) -> str:
        return self.task


@dataclass(frozen=True)
class StorageEvent:
    """A change to one generation of one object."""

    event_type: StorageEventType
    bucket: str
    name: str
    generation: str
    message: PushMessage
    metageneration: str = ""
    resource: Mapping[str, Any] = field(default_factory=dict)
    """The JSON_API_V1 object resource, when the notification carried one."""
    route: Route = Route.STORAGE
    continuation: str = ""
    """Set on a continuation an import that ran out of budget published (``consumer.storage.
    continued``): its own key, so it runs once and apart from the notification it carries on."""

    @property
    def key(self) -> str:
        bucket, name = escape(self.bucket, "/"), escape(self.name, "#")
        base = f"storage:{bucket}/{name}#{escape(self.generation, ':')}:{self.event_type.value}"
        if self.continuation:
            return f"{base}:continuation:{self.continuation}"
        if self.event_type is StorageEventType.OBJECT_METADATA_UPDATE:
            # Without a JSON payload there is no metageneration: fall back to the delivery id,
            # so distinct updates never collide (a duplicate may then run twice; it is metadata).
            return f"{base}:{self.metageneration or 'message-' + self.message.message_id}"
        return base

    @property
    def size(self) -> int | None:
        try:  # a string or a JSON number (proto3); anything else is unknown, not an error
            return optional_int64(self.resource.get("size"), "size")
        except NotInt64:
            return None

    @property
    def content_type(self) -> str:
        value = self.resource.get("contentType", "")
        return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class DeployEvent:
    """One release of one service; CI retries and Pub/Sub duplicates collide on the key."""

    service: str
    release: str
    message: PushMessage
    environment: str = ""
    commit: str = ""
    route: Route = Route.DEPLOY

    @property
    def key(self) -> str:
        return f"deploy:{escape(self.service, ':')}:{self.release}"


@dataclass(frozen=True)
class JobEvent:
    """A message on the jobs topic: one job of ``kind`` under ``job_key``. Classification only
    reads its attributes; the jobs feature checks the rest (``consumer.jobs.topic``), so a bad
    job is recorded ``dead`` with the full message instead of refused with nothing stored."""

    kind: str
    message: PushMessage
    attributes: Mapping[str, str] = field(default_factory=dict)
    """The message's ``job_*`` attributes by their name without ``job_`` (``run_at``...)."""
    route: Route = Route.JOB

    @property
    def job_key(self) -> str:
        """The producer's key in the producers' namespace, else the delivery's identity: a
        message published twice with one key is one job, and one message delivered twice is
        one job. No producer key can be one that trusted code enqueues under."""
        if key := self.attributes.get("key"):
            return PRODUCER_NAMESPACE + key
        where = self.message.subscription or "unknown-subscription"
        return f"{escape(where, ':')}:{self.message.message_id}"

    @property
    def lock_key(self) -> str | None:
        """The producer's lock key in the producers' namespace: its jobs never queue behind,
        nor hold up, the lock keys trusted code uses."""
        lock_key = self.attributes.get("lock_key")
        return None if lock_key is None else PRODUCER_NAMESPACE + lock_key

    @property
    def key(self) -> str:
        return f"job:{self.job_key}"

    @property
    def name(self) -> str:
        return self.kind


@dataclass(frozen=True)
class OtherEvent:
    """Anything we do not recognise: keyed by delivery identity, recorded as unroutable."""

    message: PushMessage
    route: Route = Route.OTHER

    @property
    def key(self) -> str:
        where = self.message.subscription or "unknown-subscription"
        return f"message:{escape(where, ':')}:{self.message.message_id}"


Event = TickEvent | StorageEvent | DeployEvent | JobEvent | OtherEvent


def privileged(event: Event) -> str:
    """What ``event`` asks for that only the service's own tooling may (``""``: nothing):
    a run now, a continuation (``consumer.pipeline.admission`` honours them signed only)."""
    if isinstance(event, TickEvent) and event.run_now:
        return "run_now"
    if isinstance(event, TickEvent | StorageEvent) and event.continuation:
        return "continuation"
    return ""


def escape(component: str, separator: str) -> str:
    """``component`` with ``%`` and ``separator`` percent-encoded (``%25``, ``:`` as ``%3A``...),
    so the separator that follows it in a key is the first unescaped one."""
    if "%" not in component and separator not in component:
        return component
    escaped = component.replace("%", "%25")
    return escaped.replace(separator, f"%{ord(separator):02X}")
