"""Typed events and their idempotency keys (DESIGN.md section 2).

A key is derived from what the event *means*, not from its messageId, so that a duplicate with a
fresh messageId (GCS does this) still collides in the inbox.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from consumer.message import PushMessage


class Route(StrEnum):
    TICK = "tick"
    STORAGE = "storage"
    DEPLOY = "deploy"
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
    period_seconds: int
    message: PushMessage
    payload: Mapping[str, Any] = field(default_factory=dict)
    route: Route = Route.TICK
    continuation: str = ""
    """Set on a continuation a budget-bound run published (``consumer.continuation``): its
    own key, never stale, and it never advances the task's completed slot."""

    @property
    def key(self) -> str:
        if self.continuation:
            return f"tick:{self.task}:continuation:{self.continuation}"
        return f"tick:{self.task}:{self.slot.isoformat()}"

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

    @property
    def key(self) -> str:
        base = f"storage:{self.bucket}/{self.name}#{self.generation}:{self.event_type.value}"
        if self.event_type is StorageEventType.OBJECT_METADATA_UPDATE:
            # Without a JSON payload there is no metageneration: fall back to the delivery id,
            # so distinct updates never collide (a duplicate may then run twice; it is metadata).
            return f"{base}:{self.metageneration or 'message-' + self.message.message_id}"
        return base

    @property
    def size(self) -> int | None:
        raw = self.resource.get("size")
        if isinstance(raw, str) and raw.isascii() and raw.isdigit() and len(raw) <= 19:
            return int(raw)
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
        return f"deploy:{self.service}:{self.release}"


@dataclass(frozen=True)
class OtherEvent:
    """Anything we do not recognise: keyed by delivery identity, recorded as unroutable."""

    message: PushMessage
    route: Route = Route.OTHER

    @property
    def key(self) -> str:
        where = self.message.subscription or "unknown-subscription"
        return f"message:{where}:{self.message.message_id}"


Event = TickEvent | StorageEvent | DeployEvent | OtherEvent
