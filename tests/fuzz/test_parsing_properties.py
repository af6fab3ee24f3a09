"""Property tests: whatever the bytes, headers or JSON, parsing and classification raise only
their typed errors (-> 400), never anything that would become a 500."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consumer.errors import InvalidEnvelope, InvalidEvent
from consumer.pipeline.registry import Registry
from consumer.wire.classify import classify
from consumer.wire.envelope import Limits, parse_push
from consumer.wire.message import CloudEventMeta, PushMessage
from tests.fuzz import strategies as hs

LIMITS = Limits(max_attributes=100, max_json_depth=16)
PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
REGISTRY = Registry()
REGISTRY.period_overrides = {"sweep": 60, "weekly": 7 * 86400, "odd": 7}


def parse_or_refuse(headers: dict[str, str], body: bytes) -> PushMessage | None:
    try:
        return parse_push(headers, body, LIMITS)
    except InvalidEnvelope as error:
        assert error.message  # a refusal always says what is wrong
        return None


def classify_or_refuse(message: PushMessage) -> Any:
    try:
        return classify(message, REGISTRY.schedule_of)
    except InvalidEvent as error:
        assert error.message
        return None


@PROPERTY
@given(headers=st.dictionaries(hs.HEADER_NAMES, hs.HEADER_TEXT, max_size=6), body=st.binary())
def test_arbitrary_bytes_and_headers_raise_only_invalid_envelope(
    headers: dict[str, str], body: bytes
) -> None:
    parse_or_refuse(headers, body)


@PROPERTY
@given(document=hs.JSON)
def test_arbitrary_json_raises_only_invalid_envelope(document: Any) -> None:
    parse_or_refuse({}, json.dumps(document).encode())


@PROPERTY
@given(request=hs.requests())
def test_nearly_valid_requests_parse_and_classify_or_raise_typed_errors(
    request: tuple[dict[str, str], bytes],
) -> None:
    message = parse_or_refuse(*request)
    if message is None:
        return
    assert message.publish_time.tzinfo is not None
    event = classify_or_refuse(message)
    if event is not None:
        assert event.key and "\x00" not in event.key


@PROPERTY
@given(
    attributes=hs.ATTRIBUTES,
    data=hs.payloads(),
    publish_time=hs.UTC_MOMENTS,
    cloudevent=st.none()
    | st.builds(
        CloudEventMeta,
        id=hs.TEXT,
        source=hs.TEXT,
        type=st.sampled_from(sorted(hs.CLOUDEVENT_TYPES)),
    ),
)
def test_any_message_classifies_or_raises_invalid_event(
    attributes: dict[str, str], data: bytes, publish_time: Any, cloudevent: Any
) -> None:
    message = PushMessage("1", publish_time, data, attributes, "s", cloudevent=cloudevent)
    event = classify_or_refuse(message)
    if event is not None:
        assert event.key


@PROPERTY
@given(request=hs.requests())
def test_a_parsed_message_survives_storage_and_replay(
    request: tuple[dict[str, str], bytes],
) -> None:
    """The inbox stores ``to_json`` and replay reads ``from_json``: nothing may be lost."""
    message = parse_or_refuse(*request)
    if message is not None:
        stored = json.loads(json.dumps(message.to_json()))
        assert PushMessage.from_json(stored) == message


def test_regression_times_that_overflowed_are_refused() -> None:
    """Found by the properties above: both used to escape as OverflowError / ValueError (500)."""
    for stamp, task in [("0001-01-01T00:00:00+05:00", "sweep"), ("0001-01-01T00:00:00Z", "weekly")]:
        body = {"message": {"messageId": "1", "publishTime": stamp, "attributes": {"task": task}}}
        message = parse_or_refuse({}, json.dumps(body).encode())
        assert message is None


@pytest.mark.parametrize(
    "message",
    [
        {"messageId": "a\x00b"},
        {"messageId": "\ud800"},
        {"messageId": "1", "attributes": {"k\x00": "v"}},
        {"messageId": "1", "attributes": {"k": "x\udfffy"}},
        {"messageId": "1", "orderingKey": "\x00"},
        {"messageId": "1", "data": base64.b64encode(b'{"task": "sw\\u0000eep"}').decode()},
        {"messageId": "1", "data": base64.b64encode(b'{"task": "\\ud800"}').decode()},
    ],
)
def test_regression_text_the_database_cannot_store_is_refused(message: dict[str, Any]) -> None:
    """Found by the PostgreSQL run: a NUL in a message id was a 500 (text cannot hold NUL)."""
    body = {"message": {"publishTime": "2024-01-01T00:00:00Z", **message}}
    parsed = parse_or_refuse({}, json.dumps(body).encode())
    assert parsed is None or classify_or_refuse(parsed) is None
