"""GCS int64 fields as JSON numbers or decimal strings (proto3's JSON mapping allows both):
accepted exactly, refused with the reason, in every format that carries an object resource."""

from __future__ import annotations

import base64
import json
import re
from decimal import Decimal
from typing import Any

import pytest
from flask.testing import FlaskClient

from consumer.errors import InvalidEvent
from consumer.wire.classify import classify
from consumer.wire.envelope import parse_push
from consumer.wire.events import StorageEvent
from consumer.wire.int64 import INT64_MAX, NotInt64, int64_text

# The object resource of google-cloudevents' StorageObjectData-complex.json, abridged.
RESOURCE = {"bucket": "sample-bucket", "name": "MyFile", "generation": 96883251,
            "metageneration": 1, "size": 1024, "contentType": "text/plain"}  # fmt: skip


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("1587627537231057", "1587627537231057"),
        ("007", "007"),  # a string is kept as written: keys made from it do not change
        (96883251, "96883251"),
        (INT64_MAX, str(INT64_MAX)),
        (96883251.0, "96883251"),
        (Decimal("9.6883251E+7"), "96883251"),
        (Decimal(f"{INT64_MAX}.000"), str(INT64_MAX)),
    ],
)
def test_int64_values_are_read_exactly(value: Any, text: str) -> None:
    assert int64_text(value, "generation") == text


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (-1, "must be in 0..9223372036854775807, got -1"),
        (INT64_MAX + 1, "got 9223372036854775808"),
        ("9999999999999999999", "must be a decimal integer in 0..9223372036854775807"),
        ("-5", "must be a decimal integer"),
        (" 1", "must be a decimal integer"),
        ("²", "must be a decimal integer"),
        (1.5, "must be a whole number in 0..9223372036854775807, got 1.5"),
        (Decimal("1.5"), "must be a whole number in 0..9223372036854775807, got 1.5"),
        (Decimal("1E+999999999"), "must be a whole number"),
        (2.0**60, "past 2**53 in a non-integer form and may have been rounded"),
        (float("nan"), "must be a whole number"),
        (True, "got bool"),
        (None, "got NoneType"),
        ([1], "got list"),
    ],
)
def test_other_values_are_refused_with_the_reason(value: Any, reason: str) -> None:
    with pytest.raises(NotInt64, match=f"^'generation' .*{_escaped(reason)}"):
        int64_text(value, "generation")


def _escaped(text: str) -> str:
    return re.escape(text)


def structured(resource: dict[str, Any]) -> tuple[dict[str, str], bytes]:
    body = {"specversion": "1.0", "type": "google.cloud.storage.object.v1.finalized",
            "source": "//storage.googleapis.com/projects/_/buckets/sample-bucket", "id": "1",
            "time": "2020-04-23T07:38:57.230Z", "data": resource}  # fmt: skip
    return {"Content-Type": "application/cloudevents+json"}, json.dumps(body).encode()


def binary(resource: dict[str, Any]) -> tuple[dict[str, str], bytes]:
    headers = {"Content-Type": "application/json", "ce-id": "1", "ce-specversion": "1.0",
               "ce-source": "//storage.googleapis.com/projects/_/buckets/sample-bucket",
               "ce-type": "google.cloud.storage.object.v1.metadataUpdated",
               "ce-time": "2020-04-23T07:38:57.230Z"}  # fmt: skip
    return headers, json.dumps(resource).encode()


def wrapped(resource: dict[str, Any]) -> tuple[dict[str, str], bytes]:
    attributes = {"eventType": "OBJECT_METADATA_UPDATE", "payloadFormat": "JSON_API_V1",
                  "bucketId": "sample-bucket", "objectId": "MyFile",
                  "objectGeneration": "96883251"}  # fmt: skip
    data = base64.b64encode(json.dumps(resource).encode()).decode()
    message = {"messageId": "1", "publishTime": "2020-04-23T08:00:00Z", "data": data,
               "attributes": attributes}  # fmt: skip
    return {"Content-Type": "application/json"}, json.dumps({"message": message}).encode()


def event_of(headers: dict[str, str], body: bytes) -> StorageEvent:
    event = classify(parse_push(headers, body), lambda _task: 60)
    assert isinstance(event, StorageEvent)
    return event


@pytest.mark.parametrize("form", [structured, binary, wrapped])
def test_numbers_are_accepted_in_every_format(form: Any) -> None:
    event = event_of(*form(RESOURCE))
    assert (event.generation, event.size) == ("96883251", 1024)
    if form is not structured:  # a metadata update's key carries the metageneration
        assert event.key.endswith("#96883251:OBJECT_METADATA_UPDATE:1")
    as_strings = {**RESOURCE, "generation": "96883251", "metageneration": "1", "size": "1024"}
    assert event.key == event_of(*form(as_strings)).key  # the same event, the same key


def test_a_fraction_in_the_raw_data_is_read_exactly_not_rounded() -> None:
    # 2**53 + 1 written with a fraction: a float would round it to 2**53, another generation.
    raw = json.dumps({**RESOURCE, "metageneration": 1}).replace(
        '"metageneration": 1', '"metageneration": 9007199254740993.0'
    )
    headers, _ = binary(RESOURCE)
    event = event_of(headers, raw.encode())
    assert event.metageneration == "9007199254740993"


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        (
            "generation",
            1.5,
            "'generation' must be a whole number in 0..9223372036854775807, got 1.5",
        ),
        ("generation", -3, "'generation' must be in 0..9223372036854775807, got -3"),
        ("metageneration", 2**63, "'metageneration' must be in 0..9223372036854775807"),
        ("generation", True, "'generation' must be an integer"),
    ],
)
def test_bad_numbers_are_refused_naming_the_field_and_why(
    field: str, value: Any, reason: str
) -> None:
    with pytest.raises(InvalidEvent, match=_escaped(reason)):
        event_of(*binary({**RESOURCE, field: value}))


def test_over_http_numbers_are_accepted_and_bad_ones_answered_400_with_the_reason(
    client: FlaskClient,
) -> None:
    headers, body = structured(RESOURCE)
    accepted = client.post("/push", data=body, headers=headers)
    assert accepted.status_code == 200, accepted.get_data(as_text=True)
    headers, body = structured({**RESOURCE, "generation": 96883251.5})
    refused = client.post("/push", data=body, headers=headers)
    assert refused.status_code == 400
    assert refused.json is not None
    assert "'generation' must be a whole number" in refused.json["error"]
    assert "got 96883251.5" in refused.json["error"]
