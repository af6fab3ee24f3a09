"""No stack traces in responses; no tokens or secrets in logs; every error is JSON."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask

from consumer.config.settings import Settings
from consumer.http.app import create_app
from consumer.observe.logs import JsonFormatter, redact
from consumer.pipeline.dispatch import Dispatcher
from consumer.service import Service
from consumer.wire.envelopes_out import wrapped_body
from tests.auth.tokens import SigningKey, claims

SECRET = "pV8sQ2-super-secret-push-token-7Kd"


@pytest.fixture
def app(sqlite_url: str) -> Flask:
    return create_app(Service.of(Settings(database_url=sqlite_url, local_mode=True)))


def boom(*_: Any, **__: Any) -> Any:
    raise RuntimeError(f"bug while handling Bearer {SECRET} and /push?token={SECRET}")


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """The service's own JSON log lines, as ``configure_logging`` formats them."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("consumer")
    logger.addHandler(handler)
    yield stream
    logger.removeHandler(handler)


def test_an_unexpected_exception_is_a_json_500_without_a_trace(
    app: Flask, log_output: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in a handler (every route is the table's: the dispatcher a push reaches here)."""
    monkeypatch.setattr(Dispatcher, "dispatch", boom)
    body = json.dumps(wrapped_body(data=b"x", message_id="m-1")).encode()
    response = app.test_client().post(
        "/push?token=" + SECRET, data=body, headers={"Authorization": f"Bearer {SECRET}"}
    )
    assert response.status_code == 500
    assert response.json is not None and response.json["outcome"] == "error"
    text = response.get_data(as_text=True)
    for leak in ("Traceback", "RuntimeError", "bug while", SECRET, "File "):
        assert leak not in text
    logged = log_output.getvalue()
    assert "Traceback" in logged and "RuntimeError" in logged  # operators still see the bug
    assert SECRET not in logged
    assert "Authorization" not in logged


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/nowhere", 404), ("GET", "/push", 405), ("DELETE", "/healthz", 405)],
)
def test_routing_errors_are_json(app: Flask, method: str, path: str, status: int) -> None:
    response = app.test_client().open(path, method=method)
    assert response.status_code == status
    assert response.content_type == "application/json"
    assert response.json is not None and response.json["outcome"] == "rejected"
    if status == 405:
        assert "Allow" in response.headers


def test_redact_blanks_every_kind_of_credential() -> None:
    jwt = SigningKey("k").sign(claims())
    text = redact(
        f"Authorization: Bearer {SECRET}; raw {jwt}; url /push?a=1&token={SECRET}&b=2; "
        "header Basic dXNlcjpwYXNzd29yZA=="
    )
    assert SECRET not in text and jwt not in text and "dXNlcjpwYXNzd29yZA" not in text
    assert "/push?a=1&token=[redacted]&b=2" in text


def test_redact_leaves_ordinary_words_alone() -> None:
    text = "the Bearer scheme is missing; basic checks passed; token refused"
    assert redact(text) == text
