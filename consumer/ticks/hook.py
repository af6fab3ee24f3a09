"""A tick sent to ``POST /ticks/<task>`` (docs/ticks.md), read: the ``PushMessage`` a Pub/Sub tick
for the task published at the scheduled time would be (attribute ``task``), so it is classified,
keyed (``tick:TASK:SLOT``), coalesced and refused from the future exactly as one: a tick of one
slot sent through ``/push`` and through ``/ticks`` is one run. Pure: no Flask, no I/O; who may send
one is the transport's door (``consumer.http.ticks``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from consumer.errors import BadRequest, InvalidEvent
from consumer.wire.envelope import Limits, load_json_object
from consumer.wire.message import Format, PushMessage
from consumer.wire.text import is_storable
from consumer.wire.timeutil import parse_rfc3339

SCHEDULE_TIME_HEADER = "X-CloudScheduler-ScheduleTime"
JOB_NAME_HEADER = "X-CloudScheduler-JobName"
SUBSCRIPTION = "ticks"
MAX_HEADER_LENGTH = 500


def tick_message(
    task: str, body: bytes, scheduled: datetime, headers: Mapping[str, str], signed: bool
) -> PushMessage:
    """The message a Pub/Sub tick for ``task`` published at ``scheduled`` would be; 400 when the
    body is not a JSON object naming the same task (a ``signed`` one must name it)."""
    document = _document(body)
    named = document.get("task")
    if named is None and signed:
        raise InvalidEvent(
            f'a signed tick\'s body must name its task: {{"task": "{task}"}} '
            "(the signature covers the body, not the path)"
        )
    if named is not None and named != task:
        raise InvalidEvent(f"the body names task {str(named)[:200]!r} but the path names {task!r}")
    attributes = {"task": task}
    if job := _optional_header(headers, JOB_NAME_HEADER):
        attributes["scheduler_job"] = job
    return PushMessage(
        message_id=f"tick-{uuid.uuid4().hex}",
        publish_time=scheduled,
        data=json.dumps({**document, "task": task}, sort_keys=True).encode(),
        attributes=attributes,
        subscription=SUBSCRIPTION,
        format=Format.HTTP_TICK,
    )


def scheduled_time(headers: Mapping[str, str]) -> datetime | None:
    """``X-CloudScheduler-ScheduleTime`` (RFC 3339 UTC, e.g. ``2026-01-05T09:00:00Z``), or None
    when absent; ``BadRequest`` when it is not a time."""
    raw = _optional_header(headers, SCHEDULE_TIME_HEADER)
    if not raw:
        return None
    try:
        return parse_rfc3339(raw)
    except ValueError:
        raise BadRequest(f"{SCHEDULE_TIME_HEADER} is not an RFC 3339 time") from None


def _document(body: bytes) -> dict[str, Any]:
    """The body as a JSON object (Cloud Scheduler may send none: ``{}``)."""
    if not body.strip():
        return {}
    document = load_json_object(body, Limits(max_json_nodes=1000))
    if "task" in document and not isinstance(document["task"], str):
        raise InvalidEvent("'task' must be a string")
    return document


def _optional_header(headers: Mapping[str, str], name: str) -> str:
    value = _header(headers, name)
    if len(value) > MAX_HEADER_LENGTH or not is_storable(value):
        raise BadRequest(f"{name} is longer than {MAX_HEADER_LENGTH} characters or not text")
    return value


def _header(headers: Mapping[str, str], name: str) -> str:
    lowered = name.lower()
    return next((v.strip() for k, v in headers.items() if k.lower() == lowered), "")
