"""The header gate, one per app, served either way: what the headers condemn is refused before a
byte of the body is read, through the plain WSGI app (the gate as ``create_app``'s middleware)
and through the ASGI bridge (which runs the gate once and then the app inside it); every refused
push is one decision line. Driven in process on SQLite."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import Engine, func, select
from werkzeug.test import EnvironBuilder

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.http.app import built_with, create_app
from consumer.http.bridge import BridgeLimits, BufferedWsgi
from consumer.http.gate import Gate
from consumer.http.request import RequestView
from consumer.http.wsgi import bridged
from consumer.inbox.schema import inbox
from consumer.service import Service
from consumer.wire.envelopes_out import wrapped_body
from tests.support.asgi import asgi_post

TOKEN = "gate-token-0123456789abcdef"
SECRET = "hook-secret-0123456789abcdef"
LARGE = 4 * 1024 * 1024  # under the push limit: only the credentials can refuse it


class Unreadable(io.RawIOBase):
    """A WSGI input that fails the test if anything reads it."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        raise AssertionError("the body was read")


@pytest.fixture
def served(sqlite_url: str) -> Iterator[tuple[Flask, Engine]]:
    settings = Settings.of(database_url=sqlite_url, push_token=TOKEN, deploy_hook_secrets=(SECRET,))
    engine = make_engine(sqlite_url)
    yield create_app(Service.of(settings, engine)), engine
    engine.dispose()


@pytest.fixture
def decided(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Captures the decision lines logged during the test."""
    caplog.set_level(logging.INFO, logger="consumer.decisions")
    return caplog


def decisions(captured: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in captured.records if record.getMessage() == "decided"]


def wsgi_post(app: Flask, path: str, length: int, **headers: str) -> tuple[int, dict[str, Any]]:
    """``POST path`` through the app's WSGI callable, declaring ``length`` bytes it never sends."""
    environ = EnvironBuilder(path=path, method="POST", headers=headers).get_environ()
    environ.update({"CONTENT_LENGTH": str(length), "wsgi.input": Unreadable()})
    started: list[str] = []
    body = b"".join(app(environ, lambda status, headers, exc=None: started.append(status)))
    return int(started[0].split()[0]), json.loads(body)


def stored(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(inbox)).scalar_one())


def test_an_unauthenticated_large_push_is_refused_unread_by_the_plain_app(
    served: tuple[Flask, Engine], decided: pytest.LogCaptureFixture
) -> None:
    app, engine = served
    status, body = wsgi_post(app, "/push?token=guess", LARGE)
    assert (status, body["outcome"], body["error"]) == (401, "rejected", "missing or invalid token")
    [line] = decisions(decided)
    assert (line.source, line.outcome, line.status) == ("push", "rejected", 401)  # type: ignore[attr-defined]
    assert stored(engine) == 0


def test_a_declared_size_over_the_limit_is_refused_unread_on_any_path(
    served: tuple[Flask, Engine], decided: pytest.LogCaptureFixture
) -> None:
    app, _ = served
    over = built_with(app).gated.gate.max_body_bytes + 1  # type: ignore[union-attr]
    assert wsgi_post(app, f"/push?token={TOKEN}", over)[0] == 413
    assert wsgi_post(app, "/nowhere", over)[0] == 413
    assert len(decisions(decided)) == 1  # the push's; the other is not a delivery


def test_a_hook_without_its_signature_is_refused_unread(
    served: tuple[Flask, Engine], decided: pytest.LogCaptureFixture
) -> None:
    app, _ = served
    status, body = wsgi_post(app, "/hooks/deploy", 100, **{"X-Consumer-Timestamp": "1700000000"})
    assert (status, body["error"]) == (401, "missing X-Consumer-Signature header")
    [line] = decisions(decided)
    assert line.source == "hook"  # type: ignore[attr-defined]


@pytest.mark.parametrize("through", ["plain", "bridge"])
@pytest.mark.parametrize(
    ("query", "body", "status"),
    [("token=guess", b"{}", 401), (f"token={TOKEN}", b"{not json", 400)],
)
def test_a_refused_push_is_one_decision_line_however_it_is_served(
    served: tuple[Flask, Engine],
    decided: pytest.LogCaptureFixture,
    through: str,
    query: str,
    body: bytes,
    status: int,
) -> None:
    """Refused by the gate (401) or by the view's parse (400): decided once, with its duration."""
    app, _ = served
    if through == "bridge":
        answered = asgi_post(bridged(app), "/push", query, body)[0]
    else:
        answered = app.test_client().post(f"/push?{query}", data=body).status_code
    assert answered == status
    [line] = decisions(decided)
    assert line.status == status and line.duration_ms >= 0  # type: ignore[attr-defined]


def test_the_bridge_runs_the_gate_once_per_request(
    served: tuple[Flask, Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bridge admits the request and the door inside it reads that admission: one call."""
    calls: list[RequestView] = []
    real = Gate.admit

    def counted(self: Gate, view: RequestView) -> Any:
        calls.append(view)
        return real(self, view)

    monkeypatch.setattr(Gate, "admit", counted)
    app, engine = served
    body = json.dumps(wrapped_body(data=b"x", message_id="m-1")).encode()
    assert asgi_post(bridged(app), "/push", f"token={TOKEN}", body)[0] == 200
    assert len(calls) == 1 and stored(engine) == 1
    assert app.test_client().post(f"/push?token={TOKEN}", data=body).status_code == 200
    assert len(calls) == 2  # the plain app: its door's


def test_a_body_too_slow_is_a_408_from_the_outcome_table(
    served: tuple[Flask, Engine], decided: pytest.LogCaptureFixture
) -> None:
    """The bridge's own refusals are the table's: 408 ``rejected`` (not an ack: redelivered),
    and for a push, its decision line."""
    app, _ = served
    built = built_with(app)
    assert built is not None
    limits = BridgeLimits(max_body_bytes=1000, body_timeout_seconds=0.2,
                          header_timeout_seconds=1, threads=1)  # fmt: skip
    bridge = BufferedWsgi(built.gated, limits, built.gated.gate)
    scope = {
        "type": "http", "method": "POST", "path": "/push", "http_version": "1.1",
        "query_string": f"token={TOKEN}".encode(), "headers": [(b"content-length", b"10")],
        "scheme": "http",
    }  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def never() -> dict[str, Any]:
        await asyncio.sleep(5)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(bridge(scope, never, send))
    assert sent[0]["status"] == 408
    assert json.loads(sent[1]["body"])["outcome"] == "rejected"
    [line] = decisions(decided)
    assert line.status == 408  # type: ignore[attr-defined]
