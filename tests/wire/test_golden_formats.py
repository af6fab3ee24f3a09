"""Every documented delivery format parses to the expected message, event and idempotency key."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from consumer.wire.classify import classify
from consumer.wire.envelope import parse_push

FORMATS = Path(__file__).parent.parent / "data" / "formats"
CASES = sorted(path.name.removesuffix(".input.json") for path in FORMATS.glob("*.input.json"))
PERIODS = {"sweep": 300, "cleanup": 86400}


def load_case(name: str) -> tuple[dict[str, str], bytes, dict[str, Any]]:
    given = json.loads((FORMATS / f"{name}.input.json").read_text())
    expected = json.loads((FORMATS / f"{name}.expected.json").read_text())
    body = given["body"]
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    return given["headers"], raw, expected


def test_there_is_a_fixture_for_every_format() -> None:
    formats = {load_case(name)[2]["format"] for name in CASES}
    assert formats == {"wrapped", "unwrapped", "cloudevent-binary", "cloudevent-structured"}
    assert len(CASES) >= 13


@pytest.mark.parametrize("name", CASES)
def test_golden_format(name: str) -> None:
    headers, body, expected = load_case(name)
    message = parse_push(headers, body)
    event = classify(message, lambda task: PERIODS.get(task, 60))
    assert {
        "message_id": message.message_id,
        "publish_time": message.publish_time.isoformat(),
        "subscription": message.subscription,
        "attributes": dict(message.attributes),
        "data_base64": base64.b64encode(message.data).decode(),
        "delivery_attempt": message.delivery_attempt,
        "format": message.format.value,
        "route": event.route.value,
        "key": event.key,
    } == expected


@pytest.mark.parametrize("name", CASES)
def test_stored_form_round_trips(name: str) -> None:
    """The inbox keeps ``to_json``; replay rebuilds the message from it, unchanged."""
    headers, body, _ = load_case(name)
    message = parse_push(headers, body)
    from consumer.wire.message import PushMessage

    assert PushMessage.from_json(json.loads(json.dumps(message.to_json()))) == message
