"""A job API caller for tests: signs each request as any client must (HMAC over the timestamp,
the method, the decoded path and the body; docs/job-api.md), through Flask's test client or real
HTTP (``requests``)."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote, unquote

import requests
from flask.testing import FlaskClient

from consumer.auth.signature import request_message, signed_headers

SECRET = "job-api-secret-0123456789"
OTHER_SECRET = "not-the-job-api-secret-0123"
Answer = tuple[int, dict[str, Any]]


def path_of(key: str, retry: bool = False) -> str:
    return f"/jobs/{quote(key, safe='')}" + ("/retry" if retry else "")


def encoded(body: Any) -> bytes:
    if body is None:
        return b""
    return body if isinstance(body, bytes) else json.dumps(body).encode()


def headers_for(
    method: str, path: str, data: bytes, secret: str = SECRET, at: float | None = None
) -> dict[str, str]:
    """The signature headers of a request (``path`` as sent: it is decoded to sign it)."""
    stamp = int(time.time() if at is None else at)
    message = request_message(method, unquote(path), data)
    return {**signed_headers(secret, stamp, message), "Content-Type": "application/json"}


def call(client: FlaskClient, method: str, path: str, body: Any = None, **signing: Any) -> Answer:
    data = encoded(body)
    extra = signing.pop("headers", {})
    headers = {**headers_for(method, path, data, **signing), **extra}
    response = client.open(path, method=method, data=data, headers=headers)
    return response.status_code, response.json or {}


def http_call(base: str, method: str, path: str, body: Any = None, **signing: Any) -> Answer:
    data = encoded(body)
    headers = headers_for(method, path, data, **signing)
    response = requests.request(method, base + path, data=data, headers=headers, timeout=30)
    return response.status_code, response.json()
