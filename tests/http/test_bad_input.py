"""Malformed input gets a 400 (or 413) with a clear message, never a 500, and stores nothing."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine, func, select

from consumer.config.settings import Settings
from consumer.http.app import create_app
from consumer.inbox.schema import inbox
from consumer.service import Service
from consumer.wire.envelopes_out import storage_body, wrapped_body


def _with(message: dict[str, Any], **envelope: Any) -> bytes:
    return json.dumps(
        {"message": message, "subscription": "projects/p/subscriptions/s", **envelope}
    ).encode()


GOOD = {"messageId": "1", "publishTime": "2024-01-01T00:00:00Z"}
BAD_BODIES: dict[str, bytes] = {
    "empty body": b"",
    "whitespace body": b"  \n",
    "not json": b"this is not json",
    "json array": b"[1, 2, 3]",
    "json string": b'"message"',
    "invalid utf-8": b"\xff\xfe{\x00",
    "missing message": json.dumps({"subscription": "s"}).encode(),
    "message is a list": json.dumps({"message": []}).encode(),
    "message id missing": _with({"publishTime": "2024-01-01T00:00:00Z"}),
    "message id a number": _with({"messageId": 12, "publishTime": "2024-01-01T00:00:00Z"}),
    "publish time missing": _with({"messageId": "1"}),
    "publish time garbage": _with({"messageId": "1", "publishTime": "yesterday"}),
    "publish time without zone": _with({"messageId": "1", "publishTime": "2024-01-01T00:00:00"}),
    "data not base64": _with({**GOOD, "data": "@@not base64@@"}),
    "data a number": _with({**GOOD, "data": 42}),
    "attributes a list": _with({**GOOD, "attributes": ["a"]}),
    "attribute value a number": _with({**GOOD, "attributes": {"a": 1}}),
    "enormous attribute map": _with({**GOOD, "attributes": {f"k{i}": "v" for i in range(5000)}}),
    "delivery attempt not a number": _with(GOOD, deliveryAttempt="five"),
    "delivery attempt a float": _with(GOOD, deliveryAttempt=5.5),
    "subscription a number": json.dumps({"message": GOOD, "subscription": 7}).encode(),
    "deeply nested": b'{"message": ' + b'{"a": ' * 100 + b"1" + b"}" * 101,
    "absurdly nested": b"[" * 100_000 + b"]" * 100_000,
    "tick without task name": _with({**GOOD, "attributes": {"task": ""}}),
    "deploy without release": _with({**GOOD, "attributes": {"event": "deploy", "service": "a"}}),
    "structured cloudevent without time": json.dumps(
        {"specversion": "1.0", "type": "com.example.unknown", "source": "x", "id": "1"}
    ).encode(),
}
BAD_HEADERS: dict[str, dict[str, str]] = {
    "binary cloudevent without time": {
        "ce-id": "1", "ce-source": "s", "ce-specversion": "1.0", "ce-type": "com.example.nope",
    },
    "binary cloudevent time out of range": {
        "ce-id": "1", "ce-source": "s", "ce-specversion": "1.0", "ce-type": "com.example.nope",
        "ce-time": "9999-12-31T23:59:59-14:00",
    },
    "binary cloudevent missing id": {
        "ce-source": "s", "ce-specversion": "1.0", "ce-time": "2024-01-01T00:00:00Z",
        "ce-type": "google.cloud.storage.object.v1.finalized",
    },
    "unwrapped without publish time": {"x-goog-pubsub-message-id": "9"},
}  # fmt: skip


def inbox_count(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(inbox)).scalar_one())


@pytest.mark.parametrize("case", sorted(BAD_BODIES))
def test_bad_body_is_rejected_and_nothing_stored(
    case: str, client: FlaskClient, engine: Engine
) -> None:
    response = client.post("/push", data=BAD_BODIES[case], content_type="application/json")
    assert response.status_code == 400, response.get_data(as_text=True)
    assert response.json is not None and response.json["outcome"] == "rejected"
    assert response.json["error"]
    assert inbox_count(engine) == 0


@pytest.mark.parametrize("case", sorted(BAD_HEADERS))
def test_bad_headers_are_rejected(case: str, client: FlaskClient, engine: Engine) -> None:
    response = client.post("/push", data=b"{}", headers=BAD_HEADERS[case])
    assert response.status_code == 400
    assert inbox_count(engine) == 0


def test_storage_event_with_bad_generation_is_rejected(client: FlaskClient, engine: Engine) -> None:
    body = storage_body("bucket", "file.csv", generation="not-a-number")
    assert client.post("/push", json=body).status_code == 400
    assert inbox_count(engine) == 0


def test_body_over_the_limit_gets_413(settings: Settings, engine: Engine) -> None:
    small = Settings.of(database_url=settings.database_url, local_mode=True, max_body_bytes=4096)
    client = create_app(Service.of(small, engine)).test_client()
    data = base64.b64encode(b"x" * 8192)
    body = (
        json.dumps(wrapped_body())
        .encode()
        .replace(b'"message": {', b'"message": {"data": "' + data + b'", ')
    )
    response = client.post("/push", data=body, content_type="application/json")
    assert response.status_code == 413
    assert response.json is not None and response.json["outcome"] == "rejected"
    assert inbox_count(engine) == 0


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_wrong_method_is_a_json_405(method: str, client: FlaskClient) -> None:
    response = client.open("/push", method=method)
    assert response.status_code == 405
    assert response.json is not None and response.json["outcome"] == "rejected"
