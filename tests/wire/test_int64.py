"""Integers as the formats allow them: a JSON number or a decimal string, read exactly; every
refusal's decision log line says why."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from flask.testing import FlaskClient

from consumer.errors import InvalidEnvelope
from consumer.wire.envelope import parse_push

GOOD = {"messageId": "1", "publishTime": "2024-01-01T00:00:00Z"}


def body(**envelope: Any) -> bytes:
    document = {"message": GOOD, "subscription": "projects/p/subscriptions/s", **envelope}
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    ("given", "expected"), [(5, 5), ("5", 5), ("0", 0), (2**31 - 1, 2**31 - 1), ("007", 7)]
)
def test_delivery_attempt_as_a_number_or_a_decimal_string(given: Any, expected: int) -> None:
    assert parse_push({}, body(deliveryAttempt=given)).delivery_attempt == expected


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("5.0", "a string that is not a decimal number"),
        ("-1", "a string that is not a decimal number"),
        (" 5", "a string that is not a decimal number"),
        ("\uff15", "a string that is not a decimal number"),  # fullwidth 5: int() takes it
        ("99999999999999999999", "must be 0..2147483647"),
        ("1" * 40, "a string that is not a decimal number"),
        (5.0, "got float"),
        (True, "got a boolean"),
        (-1, "must be 0..2147483647"),
        (2**31, "must be 0..2147483647"),
        (2**63, "must be 0..2147483647"),
    ],
)
def test_other_delivery_attempts_are_refused_with_the_reason(given: Any, reason: str) -> None:
    with pytest.raises(InvalidEnvelope, match=reason):
        parse_push({}, body(deliveryAttempt=given))


def test_a_refusals_log_line_names_its_reason(
    client: FlaskClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="consumer.decisions"):
        response = client.post("/push", data=body(deliveryAttempt="five"))
    assert response.status_code == 400
    (line,) = [r for r in caplog.records if r.getMessage() == "decided"]
    assert "deliveryAttempt" in line.__dict__["error"] and line.__dict__["outcome"] == "rejected"
