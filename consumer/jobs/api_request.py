"""A job API enqueue request (``POST /jobs``, docs/job-api.md), read from its JSON body into a
``NewJob``: pure, no I/O. Every fault is a ``ConsumerError`` whose status says what was wrong
(400; 413 for a payload over the limit), raised before anything is stored.

The rules are the other producers': the kind must be one this process runs (``job_kinds`` of the
registry, as the jobs topic checks), the payload a JSON object within
``CONSUMER_JOB_MAX_PAYLOAD_BYTES`` (measured before filtering, as the jobs topic and
``consumer_enqueue`` measure it), filtered to the kind's producer fields
(``consumer.jobs.fields``, the same function the jobs topic uses, and the fields
``consumer_enqueue`` applies from ``job_kinds``). Keys are the team's, as ``consumer_enqueue``'s:
no ``topic:`` prefix, so a key enqueued in SQL and over HTTP is one job.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from consumer.errors import BadRequest, BodyTooLarge
from consumer.jobs.fields import producer_fields, restricted
from consumer.jobs.model import (
    INT32_MAX,
    INT32_MIN,
    MAX_GROUP_LENGTH,
    InvalidJob,
    NewJob,
    group_from,
)
from consumer.pipeline.extensions import Functions
from consumer.wire.classify import MAX_NAME_LENGTH
from consumer.wire.json_limits import strict_loads, too_many_values
from consumer.wire.text import is_storable
from consumer.wire.timeutil import parse_rfc3339

MAX_KEY_LENGTH = MAX_NAME_LENGTH
"""A key's longest, in characters: the jobs topic's limit on ``job_key``."""
FIELDS = frozenset(
    {"kind", "payload", "key", "run_at", "priority", "max_attempts", "lock_key", "group"}
)
UNADDRESSABLE = (".", "..")
"""Keys a URL cannot carry as a path segment: clients resolve them away."""


@dataclass(frozen=True)
class Limits:
    max_payload_bytes: int
    max_json_nodes: int
    max_json_depth: int


@dataclass(frozen=True)
class EnqueueRequest:
    job: NewJob
    ignored_fields: list[str]
    """Payload fields the kind does not let producers set, dropped."""


def parse(
    body: bytes, kinds: Functions, limits: Limits, group_by: Mapping[str, str | None] | None = None
) -> EnqueueRequest:
    """The request a body asks for; ``BadRequest`` (or ``BodyTooLarge``) naming the fault.
    ``group_by``: the payload field each kind takes its jobs' group from when the request
    names none (a kind's ``group_by``, as the jobs topic derives it)."""
    document = _document(body, limits)
    unknown = sorted(set(document) - FIELDS)
    if unknown:
        raise BadRequest(
            f"unknown field(s) {', '.join(unknown)}; expected {', '.join(sorted(FIELDS))}"
        )
    kind = _kind(document.get("kind"), kinds.names())
    payload = _payload(document.get("payload", {}), limits.max_payload_bytes)
    kept, ignored = restricted(payload, producer_fields(kinds, kind))
    key, lock_key = document.get("key"), document.get("lock_key")
    group = document.get("group")
    group = group_from(kept, (group_by or {}).get(kind)) if group is None else _group(group)
    try:
        job = NewJob(
            kind, kept, uuid.uuid4().hex if key is None else checked_key(key, "key"),
            _run_at(document.get("run_at")),
            _whole(document.get("priority", 0), "priority", INT32_MIN),
            _optional_whole(document.get("max_attempts"), "max_attempts", 1),
            None if lock_key is None else checked_key(lock_key, "lock_key"),
            group,
        )  # fmt: skip
    except InvalidJob as exc:
        raise BadRequest(str(exc)) from None
    return EnqueueRequest(job, ignored)


def checked_key(value: Any, label: str = "key") -> str:
    """A key the API takes: a non-empty string of at most ``MAX_KEY_LENGTH`` characters that a
    database stores and a URL path segment carries (no ``/``, not ``.`` or ``..``)."""
    if not isinstance(value, str) or not value:
        raise BadRequest(f"'{label}' must be a non-empty string")
    if len(value) > MAX_KEY_LENGTH:
        raise BadRequest(f"'{label}' is longer than {MAX_KEY_LENGTH} characters")
    if not is_storable(value):
        raise BadRequest(f"'{label}' contains a NUL or an unpaired surrogate character")
    if label == "key" and ("/" in value or value in UNADDRESSABLE):
        raise BadRequest("'key' must not contain '/' nor be '.' or '..': it is a path segment "
                         "of /jobs/{key}")  # fmt: skip
    return value


def _group(value: Any) -> str:
    """A group named by the request: jobs of different groups take turns in the claim."""
    if not isinstance(value, str) or not value or len(value) > MAX_GROUP_LENGTH:
        raise BadRequest(f"'group' must be a string of 1..{MAX_GROUP_LENGTH} characters")
    if not is_storable(value):
        raise BadRequest("'group' contains a NUL or an unpaired surrogate character")
    return value


def _document(body: bytes, limits: Limits) -> dict[str, Any]:
    if not body.strip():
        raise BadRequest("empty body: expected a JSON object with at least 'kind'")
    if too_many_values(body, limits.max_json_nodes):
        raise BadRequest(f"the body has more than {limits.max_json_nodes} JSON values")
    try:
        document = strict_loads(body, limits.max_json_depth)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadRequest("the body is nested too deeply") from None
    if not isinstance(document, dict):
        raise BadRequest(f"the body must be a JSON object, not {_type(document)}")
    return document


def _kind(value: Any, known: Collection[str]) -> str:
    if not isinstance(value, str) or not value:
        raise BadRequest("'kind' is required: a job kind's name")
    if value not in known:
        shown = value if len(value) <= 100 else value[:100] + "..."
        raise BadRequest(
            f"unknown job kind {shown!r} (known: {', '.join(sorted(known)) or 'none'})"
        )
    return value


def _payload(value: Any, limit: int) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise BadRequest(f"'payload' must be a JSON object, not {_type(value)}")
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
    if size > limit:
        raise BodyTooLarge(f"the payload is {size} bytes, over the {limit}-byte limit")
    return value


def _run_at(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"'run_at' must be an RFC 3339 string, not {_type(value)}")
    try:
        return parse_rfc3339(value)
    except ValueError as exc:
        raise BadRequest(f"'run_at' is not an RFC 3339 time with a zone: {exc}") from None


def _whole(value: Any, label: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"'{label}' must be a whole number, not {_type(value)}")
    if not low <= value <= INT32_MAX:
        raise BadRequest(f"'{label}' must be in {low}..{INT32_MAX}")
    return value


def _optional_whole(value: Any, label: str, low: int) -> int | None:
    return None if value is None else _whole(value, label, low)


def _type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")
