"""The front door's findings, each sent as the attacker sent it, in process on SQLite: through the
ASGI bridge (what ``consumer serve`` runs) and through the plain WSGI app. These use only what
every version of the service has (``create_app``, ``bridged``), so each fails on the code before
the front door and passes after."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import Engine, func, select

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.http import bridge as bridge_module
from consumer.http.app import create_app
from consumer.http.wsgi import bridged
from consumer.inbox.schema import inbox
from consumer.service import Service
from consumer.wire.envelopes_out import wrapped_body
from tests.auth.tokens import CertsServer, SigningKey, claims
from tests.http.conftest import SCHEDULER, SECRET, TICK_AUDIENCE

TOKEN = "push-token-0123456789abcdef"
HOOK_SECRET = "hook-secret-0123456789abcdef"
JUNK_SIGNED = [
    (b"x-consumer-timestamp", b"1700000000"),
    (b"x-consumer-signature", b"v1=" + b"ab" * 32),
]
TASKS = ("sweep", "cleanup", "invented-task")


@pytest.fixture
def served(sqlite_url: str, certs_server: CertsServer) -> Iterator[tuple[Flask, Engine]]:
    settings = Settings.of(
        database_url=sqlite_url, push_token=TOKEN, deploy_hook_secrets=(HOOK_SECRET,),
        tick_hook_secrets=(SECRET,), tick_hook_audience=TICK_AUDIENCE,
        tick_hook_service_accounts=(SCHEDULER,), oidc_certs_url=certs_server.url,
    )  # fmt: skip
    engine = make_engine(sqlite_url)
    yield create_app(Service.of(settings, engine)), engine
    engine.dispose()


def stored(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(inbox)).scalar_one())


class Feed:
    """An ASGI ``receive`` that sends ``body`` in 16 KiB pieces (a chunked body: no length),
    counting what the application took."""

    def __init__(self, size: int) -> None:
        self.left, self.taken = size, 0

    async def __call__(self) -> dict[str, Any]:
        if self.left <= 0:
            await asyncio.sleep(5)
            return {"type": "http.disconnect"}
        piece = min(self.left, 16384)
        self.left -= piece
        self.taken += piece
        return {"type": "http.request", "body": b"x" * piece, "more_body": self.left > 0}


def through_bridge(
    app: Flask, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes | Feed
) -> tuple[int, dict[str, Any]]:
    """One request through the bridge, repeated headers kept as sent."""
    scope = {
        "type": "http", "method": method, "path": path, "query_string": b"",
        "headers": headers, "http_version": "1.1", "scheme": "http", "root_path": "",
        "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 40000),
    }  # fmt: skip
    if isinstance(body, Feed):
        receive: Any = body
    else:
        scope["headers"] = [*headers, (b"content-length", str(len(body)).encode())]
        incoming = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict[str, Any]:
            return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(bridged(app)(scope, receive, send))
    return int(sent[0]["status"]), json.loads(sent[1]["body"])


@pytest.mark.parametrize("task", TASKS)
def test_an_unsigned_tick_with_two_authorization_headers_runs_nothing(
    served: tuple[Flask, Engine], task: str
) -> None:
    """Finding "Anyone can run any tick task": the last Authorization empty, junk signature
    headers. It answered 200 done and wrote the slot's row; now a 400 and nothing stored."""
    app, engine = served
    headers = [(b"authorization", b"Bearer x"), (b"authorization", b""), *JUNK_SIGNED,
               (b"content-type", b"application/json")]  # fmt: skip
    body = json.dumps({"task": task}).encode()
    status, answer = through_bridge(app, "POST", f"/ticks/{task}", headers, body)
    assert (status, answer["outcome"]) == (400, "rejected")
    assert "authorization" in answer["error"]
    assert stored(engine) == 0


@pytest.mark.parametrize("method", ["post", "Post", "pOST"])
def test_a_lower_case_push_meets_the_gate(served: tuple[Flask, Engine], method: str) -> None:
    """Finding "A lower-case method skips the gate": ``post /push`` with no token was stored."""
    app, engine = served
    body = json.dumps(wrapped_body(data=b"x", message_id="m-1")).encode()
    response = app.test_client().open("/push", method=method, data=body)
    assert response.status_code == 401
    assert stored(engine) == 0


def test_a_lower_case_tick_with_a_forged_token_runs_nothing(
    served: tuple[Flask, Engine], google_key: SigningKey
) -> None:
    """``post /ticks/cleanup`` with a token signed by no Google key ran the task."""
    app, engine = served
    forged = SigningKey("not-googles").sign(claims(aud=TICK_AUDIENCE, email=SCHEDULER))
    response = app.test_client().open(
        "/ticks/cleanup", method="post", data=b"{}", headers={"Authorization": f"Bearer {forged}"}
    )
    assert response.status_code == 401
    assert stored(engine) == 0


@pytest.mark.parametrize("path", ["/hooks/deploy", "/ticks/sweep"])
def test_a_chunked_unauthenticated_body_is_cut_off_at_the_routes_limit(
    served: tuple[Flask, Engine], monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """Finding "Unauthenticated bodies are buffered in full": a chunked body with well-formed
    junk signature headers was read up to the push limit (14 MiB) holding the server-wide
    large-body slot. Now it is refused past 64 KiB, and the slot is never taken."""
    taken: list[float] = []
    real = bridge_module.large_body_slot

    def recorded(deadline: float) -> Any:
        taken.append(deadline)
        return real(deadline)

    monkeypatch.setattr(bridge_module, "large_body_slot", recorded)
    app, engine = served
    feed = Feed(4 * 1024 * 1024)
    headers = [*JUNK_SIGNED, (b"transfer-encoding", b"chunked")]
    status, answer = through_bridge(app, "POST", path, headers, feed)
    assert (status, answer["outcome"]) == (413, "rejected")
    assert feed.taken <= 64 * 1024 + 16384
    assert taken == []
    assert stored(engine) == 0


def test_every_delivery_route_is_refused_alike_on_any_method_case(
    served: tuple[Flask, Engine],
) -> None:
    """Finding "Behind all of it, the structure": one route table decides for every serving; a
    method a delivery row does not take is a 405 naming POST, before any handler."""
    app, _ = served
    client = app.test_client()
    for path in ("/push", "/hooks/deploy", "/ticks/sweep"):
        for method in ("GET", "PUT", "delete"):
            response = client.open(path, method=method)
            assert response.status_code == 405, (method, path)
            assert response.headers["Allow"] == "POST"
            bridged_status, _ = through_bridge(app, method.upper(), path, [], b"")
            assert bridged_status == 405
