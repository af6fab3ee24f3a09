"""The one typed message every delivery format becomes, and its JSON form for the inbox."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from consumer.wire.timeutil import parse_rfc3339


class Format(StrEnum):
    """How the message reached us; kept for logs and replay."""

    WRAPPED = "wrapped"
    UNWRAPPED = "unwrapped"
    CLOUDEVENT_BINARY = "cloudevent-binary"
    CLOUDEVENT_STRUCTURED = "cloudevent-structured"
    DEPLOY_HOOK = "deploy-hook"
    HTTP_TICK = "http-tick"
    CLI = "cli"
    PULL = "pull"


@dataclass(frozen=True)
class CloudEventMeta:
    """The CloudEvents context attributes we route on."""

    id: str
    source: str
    type: str
    specversion: str = "1.0"
    subject: str = ""
    time: str = ""


@dataclass(frozen=True)
class PushMessage:
    """A Pub/Sub message as delivered, whatever the wire format."""

    message_id: str
    publish_time: datetime
    data: bytes = b""
    attributes: Mapping[str, str] = field(default_factory=dict)
    subscription: str = ""
    ordering_key: str = ""
    delivery_attempt: int | None = None
    format: Format = Format.WRAPPED
    cloudevent: CloudEventMeta | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored form: enough to replay the message through the same pipeline."""
        stored: dict[str, Any] = {
            "messageId": self.message_id,
            "publishTime": self.publish_time.isoformat(),
            "data": base64.b64encode(self.data).decode("ascii"),
            "attributes": dict(self.attributes),
            "subscription": self.subscription,
            "orderingKey": self.ordering_key,
            "deliveryAttempt": self.delivery_attempt,
            "format": self.format.value,
        }
        if self.cloudevent is not None:
            stored["cloudevent"] = vars(self.cloudevent).copy()
        return stored

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> PushMessage:
        cloudevent = stored.get("cloudevent")
        return cls(
            message_id=stored["messageId"],
            publish_time=parse_rfc3339(stored["publishTime"]),
            data=base64.b64decode(stored.get("data") or ""),
            attributes=dict(stored.get("attributes") or {}),
            subscription=stored.get("subscription") or "",
            ordering_key=stored.get("orderingKey") or "",
            delivery_attempt=stored.get("deliveryAttempt"),
            format=Format(stored.get("format") or Format.WRAPPED),
            cloudevent=CloudEventMeta(**cloudevent) if cloudevent else None,
        )
