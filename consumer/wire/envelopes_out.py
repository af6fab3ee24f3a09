"""Build push requests in Pub/Sub's real wire format: the local stand-in for Pub/Sub, used by
``consumer send``, the local ticker and the tests."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from consumer.wire.timeutil import utcnow

LOCAL_SUBSCRIPTION = "projects/local/subscriptions/consumer-push"


def wrapped_body(
    data: bytes = b"",
    attributes: Mapping[str, str] | None = None,
    message_id: str | None = None,
    publish_time: datetime | None = None,
    subscription: str = LOCAL_SUBSCRIPTION,
) -> dict[str, Any]:
    """A wrapped push body exactly as Pub/Sub sends it (both id and time spellings)."""
    message_id = message_id or str(uuid.uuid4().int)[:16]
    stamp = (publish_time or utcnow()).isoformat().replace("+00:00", "Z")
    message: dict[str, Any] = {
        "messageId": message_id,
        "message_id": message_id,
        "publishTime": stamp,
        "publish_time": stamp,
    }
    if data:
        message["data"] = base64.b64encode(data).decode("ascii")
    if attributes:
        message["attributes"] = dict(attributes)
    return {"message": message, "subscription": subscription}


def tick_body(task: str, publish_time: datetime | None = None, **kwargs: Any) -> dict[str, Any]:
    """What a Cloud Scheduler job with attribute ``task`` publishes."""
    return wrapped_body(attributes={"task": task}, publish_time=publish_time, **kwargs)


def storage_body(
    bucket: str,
    name: str,
    generation: str,
    event_type: str = "OBJECT_FINALIZE",
    resource: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """A GCS notification with a JSON_API_V1 payload (numbers as strings, as GCS sends them)."""
    object_resource = {
        "kind": "storage#object",
        "bucket": bucket,
        "name": name,
        "generation": generation,
        "metageneration": "1",
        "id": f"{bucket}/{name}/{generation}",
        **(resource or {}),
    }
    attributes = {
        "notificationConfig": f"projects/_/buckets/{bucket}/notificationConfigs/1",
        "eventType": event_type,
        "payloadFormat": "JSON_API_V1",
        "bucketId": bucket,
        "objectId": name,
        "objectGeneration": generation,
        "eventTime": utcnow().isoformat().replace("+00:00", "Z"),
    }
    data = json.dumps(object_resource).encode()
    return wrapped_body(data=data, attributes=attributes, **kwargs)


def deploy_body(
    service: str, release: str, environment: str = "", commit: str = "", **kwargs: Any
) -> dict[str, Any]:
    """A deploy announcement as the CI step publishes it."""
    payload = {"event": "deploy", "service": service, "release": release}
    if environment:
        payload["environment"] = environment
    if commit:
        payload["commit"] = commit
    return wrapped_body(data=json.dumps(payload).encode(), attributes={"event": "deploy"}, **kwargs)
