"""A push to the test app, its status and answer; a body with attributes added."""

from __future__ import annotations

from typing import Any

from flask.testing import FlaskClient


def post(client: FlaskClient, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = client.post("/push", json=body)
    return response.status_code, response.json or {}


def with_attributes(body: dict[str, Any], **attributes: str) -> dict[str, Any]:
    body["message"].setdefault("attributes", {}).update(attributes)
    return body
