"""Behind the bridge (the production worker), a push is authenticated once: by the header gate,
before its body is read. The view trusts the bridge's mark, which no client can forge; served
without the bridge, the view authenticates itself. Driven in process through the bridge's ASGI
interface with the real app on SQLite."""

from __future__ import annotations

import json
from typing import Any

from flask import Flask
from sqlalchemy import Engine, func, select

from consumer.auth.push import authenticator_for
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.http.app import create_app
from consumer.http.bridge import BufferedWsgi
from consumer.http.wsgi import bridged
from consumer.inbox.schema import inbox
from consumer.service import Service
from consumer.wire.envelopes_out import wrapped_body
from tests.support.asgi import asgi_post

TOKEN = "pV8sQ2-verification-token-for-the-bridge"


def counting_app(sqlite_url: str) -> tuple[Flask, list[str], Engine]:
    """The app, with its authenticator counting the pushes it checks."""
    settings = Settings.of(database_url=sqlite_url, push_token=TOKEN)
    checked: list[str] = []
    real = authenticator_for(settings)

    def authenticate(headers: Any, query: Any) -> None:
        checked.append(query.get("token", ""))
        real(headers, query)

    engine = make_engine(sqlite_url)
    return create_app(Service.of(settings, engine), authenticate=authenticate), checked, engine


def post(app: BufferedWsgi, query: str, body: bytes, *headers: tuple[bytes, bytes]) -> int:
    """One ``POST /push`` through the bridge's ASGI interface; its status."""
    return asgi_post(app, "/push", query, body, headers)[0]


def stored(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(inbox)).scalar_one())


def test_a_push_behind_the_bridge_is_authenticated_once(sqlite_url: str) -> None:
    flask_app, checked, engine = counting_app(sqlite_url)
    try:
        served = bridged(flask_app)
        body = json.dumps(wrapped_body(data=b"x", message_id="m-1")).encode()
        assert post(served, f"token={TOKEN}", body) == 200
        assert checked == [TOKEN]  # the gate's; the view does not verify
        assert post(served, "token=guess", body) == 401
        assert checked == [TOKEN, "guess"] and stored(engine) == 1
    finally:
        engine.dispose()


def test_the_mark_cannot_be_forged_by_a_header(sqlite_url: str) -> None:
    """Without the bridge the view authenticates, whatever headers the client sends."""
    flask_app, checked, engine = counting_app(sqlite_url)
    try:
        forged = {"Consumer.Push-Authenticated": "true", "Consumer-Push-Authenticated": "1"}
        body = wrapped_body(data=b"x", message_id="m-2")
        response = flask_app.test_client().post("/push", json=body, headers=forged)
        assert response.status_code == 401 and checked == [""] and stored(engine) == 0
    finally:
        engine.dispose()
