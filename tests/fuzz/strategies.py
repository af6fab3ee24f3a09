"""Hypothesis strategies for hostile push requests: arbitrary JSON and bytes, and envelopes that
are *nearly* right: every field has a plausible (if hostile) value, and in about half the cases
one field is broken or missing. Most cases therefore get past the first check and reach the deep
ones (classification, the inbox, the database)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from consumer.wire.envelope import CLOUDEVENT_TYPES

JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
# Characters that have broken parsers and databases before: NUL (PostgreSQL refuses it in text),
# a lone surrogate (not encodable as UTF-8), line and paragraph separators, RTL override,
# combining marks, and the separators our idempotency keys are built with.
NASTY = st.sampled_from(
    ["\x00", "a\x00b", "\ud800", "x\udfffy", "\u2028", "\u202e", "e\u0301", ":", "/", "#", " "]
)
TEXT = st.text(max_size=12) | NASTY
IDS = st.text(min_size=1, max_size=12) | NASTY
NAMES = st.sampled_from(["sweep", "weekly", "odd", "bucket", "a/b.txt", "svc", "r1"]) | IDS
DIGITS = st.integers(min_value=0, max_value=10**20).map(str)
KEYS = [
    "task", "event", "service", "release", "version", "environment", "commit", "eventType",
    "bucketId", "objectId", "objectGeneration", "payloadFormat", "bucket", "name", "generation",
    "metageneration", "size",
]  # fmt: skip
EVENT_TYPES = ["OBJECT_FINALIZE", "OBJECT_DELETE", "OBJECT_ARCHIVE", "OBJECT_METADATA_UPDATE"]
RECENT = st.datetimes(min_value=datetime(2015, 1, 1), max_value=datetime(2100, 1, 1))


@st.composite
def timestamps(draw: st.DrawFn) -> str:
    """RFC 3339 texts, mostly recent, sometimes anywhere in the datetime range; any offset and
    any precision (Google sends nanoseconds)."""
    moment = draw(st.one_of(RECENT, RECENT, RECENT, st.datetimes()))
    offset = draw(st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59) | st.just(0))
    stamp = moment.replace(tzinfo=timezone(timedelta(minutes=offset))).isoformat()
    if draw(st.booleans()) and stamp.endswith("+00:00"):
        stamp = stamp[:-6] + "Z"
    if draw(st.booleans()) and "." not in stamp:
        digits = draw(st.text(alphabet="0123456789", min_size=1, max_size=12))
        stamp = stamp[:19] + "." + digits + stamp[19:]
    return stamp


BAD_TIMES = TEXT | st.sampled_from(["", "Z", "2024-01-01T00:00:00", "2024-01-01T00:00:00.Z"])
VALUES = NAMES | DIGITS | timestamps() | st.sampled_from([*EVENT_TYPES, "JSON_API_V1"]) | TEXT
ATTRIBUTES = st.dictionaries(st.sampled_from(KEYS) | TEXT, VALUES, max_size=8)
JUNK = JSON | TEXT | BAD_TIMES


@st.composite
def break_one(draw: st.DrawFn, fields: dict[str, Any]) -> dict[str, Any]:
    """Half the time unchanged; otherwise one field replaced by junk or left out."""
    if not fields or draw(st.booleans()):
        return fields
    victim = draw(st.sampled_from(sorted(fields)))
    broken = dict(fields)
    if draw(st.booleans()):
        del broken[victim]
    else:
        broken[victim] = draw(JUNK)
    return broken


@st.composite
def payloads(draw: st.DrawFn) -> bytes:
    """Message data: a JSON object with the fields classification looks at, or any bytes."""
    if not draw(st.integers(0, 4)):
        return draw(st.binary(max_size=64))
    document = draw(st.dictionaries(st.sampled_from(KEYS), VALUES | JSON, max_size=8))
    return json.dumps(document).encode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@st.composite
def wrapped(draw: st.DrawFn) -> dict[str, Any]:
    """A wrapped push body, both spellings of id and time, as Pub/Sub sends it."""
    message_id, stamp = draw(IDS), draw(timestamps())
    message = {
        "messageId": message_id,
        "message_id": message_id,
        "publishTime": stamp,
        "publish_time": stamp,
        "data": b64(draw(payloads())),
        "attributes": draw(ATTRIBUTES),
        "orderingKey": draw(TEXT),
    }
    body = {
        "message": draw(break_one(message)),
        "subscription": draw(st.sampled_from(["projects/p/subscriptions/s", ""]) | TEXT),
        "deliveryAttempt": draw(st.integers(min_value=1, max_value=100)),
    }
    return draw(break_one(body))


@st.composite
def structured_cloudevents(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(sorted(CLOUDEVENT_TYPES)))
    event: dict[str, Any] = {
        "specversion": "1.0",
        "type": kind,
        "source": draw(IDS),
        "id": draw(IDS),
        "time": draw(timestamps()),
        "subject": draw(TEXT),
    }
    if kind.endswith("messagePublished"):
        event["data"] = draw(wrapped())
    elif draw(st.booleans()):
        event["data"] = draw(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=8))
    else:
        event["data_base64"] = b64(draw(payloads()))
    return draw(break_one(event))


HEADER_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"),
    max_size=24,
)
HEADER_ID = HEADER_TEXT.filter(lambda text: text.strip() != "")
HEADER_NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,15}", fullmatch=True)
HEADER_VALUES = (VALUES | HEADER_TEXT).filter(lambda v: all(" " <= c <= "\xff" for c in v))


def header_safe(value: object) -> str:
    """What HTTP can carry in a header: a broken value that could not be sent becomes junk
    (a client cannot send a newline in a header, so the server never sees one)."""
    if isinstance(value, str) and all(" " <= c <= "\xff" and c != "\x7f" for c in value):
        return value
    return "junk"


@st.composite
def binary_cloudevent_headers(draw: st.DrawFn) -> dict[str, str]:
    headers = {
        "ce-type": draw(st.sampled_from(sorted(CLOUDEVENT_TYPES))),
        "ce-id": draw(HEADER_ID),
        "ce-source": draw(HEADER_ID),
        "ce-specversion": "1.0",
        "ce-time": draw(timestamps()),
        "ce-subject": draw(HEADER_TEXT),
    }
    broken = draw(break_one(headers))
    return {key: header_safe(value) for key, value in broken.items()}


@st.composite
def unwrapped_headers(draw: st.DrawFn) -> dict[str, str]:
    headers = {
        "x-goog-pubsub-message-id": draw(HEADER_ID),
        "x-goog-pubsub-publish-time": draw(timestamps()),
        "x-goog-pubsub-subscription-name": draw(HEADER_TEXT),
        "x-goog-pubsub-ordering-key": draw(HEADER_TEXT),
    }
    broken = draw(break_one(headers))
    attributes = draw(st.dictionaries(st.sampled_from(KEYS) | HEADER_NAMES, HEADER_VALUES))
    metadata = {key: header_safe(value) for key, value in broken.items()}
    return {**attributes, **metadata}


@st.composite
def requests(draw: st.DrawFn) -> tuple[dict[str, str], bytes]:
    """(headers, body) of any push format, usually almost valid, sometimes garbage."""
    kind = draw(
        st.sampled_from(["wrapped", "wrapped", "structured", "binary", "unwrapped", "junk"])
    )
    if kind == "wrapped":
        return {}, json.dumps(draw(wrapped())).encode()
    if kind == "structured":
        return {}, json.dumps(draw(structured_cloudevents())).encode()
    if kind == "binary":
        headers = draw(binary_cloudevent_headers())
        body = draw(wrapped()) if "messagePublished" in headers.get("ce-type", "") else None
        return headers, json.dumps(body).encode() if body else draw(payloads())
    if kind == "unwrapped":
        return draw(unwrapped_headers()), draw(payloads())
    headers = draw(st.dictionaries(HEADER_NAMES, HEADER_TEXT, max_size=5))
    return headers, draw(st.binary(max_size=200) | JSON.map(lambda v: json.dumps(v).encode()))


# What the envelope lets through (it refuses times before the epoch and from year 9000:
# consumer.wire.timeutil).
UTC_MOMENTS = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(8999, 12, 31), timezones=st.just(UTC)
)
