"""What authentication reads is read once: a repeated ``?token=`` or ``X-Consumer-Claim`` is a
400 naming it, before any handler, however the app is served; a header whose name holds an
underscore is not read as its dashed twin. In process on SQLite (the hostile corpus sends the
same through the four real servings)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from flask import Flask
from sqlalchemy import Engine, func, select

from consumer.auth.push import allow_all
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.errors import BadRequest
from consumer.http.app import create_app
from consumer.http.environ import wsgi_environ
from consumer.http.gate import Gate
from consumer.http.request import RequestView
from consumer.http.wsgi import bridged
from consumer.inbox.schema import inbox
from consumer.service import Service
from consumer.wire.envelopes_out import wrapped_body
from tests.support.asgi import asgi_post

TOKEN = "single-token-0123456789abcdef"
PUSH = json.dumps(wrapped_body(data=b"x", message_id="m-1")).encode()
REPEATED_TOKEN = "repeated ?token= query parameter: it must be sent once"


@pytest.fixture
def served(sqlite_url: str) -> Iterator[tuple[Flask, Engine]]:
    settings = Settings.of(database_url=sqlite_url, push_token=TOKEN)
    engine = make_engine(sqlite_url)
    yield create_app(Service.of(settings, engine)), engine
    engine.dispose()


def stored(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(inbox)).scalar_one())


def view(query: str = "", **headers: str) -> RequestView:
    return RequestView("POST", "/push", query, {k.replace("_", "-"): v for k, v in headers.items()})


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("token=a&token=b", "?token= query parameter"),
        ("token=a&token=", "?token= query parameter"),
        ("token=&token=a", "?token= query parameter"),
        ("token=a&x=1&token=a", "?token= query parameter"),
        ("token=a", None),
        ("token=a,b", None),
        ("x=1&x=2", None),
    ],
)
def test_a_repeated_token_parameter_is_named(query: str, named: str | None) -> None:
    assert view(query).ambiguous() == named


def test_a_repeated_claim_header_is_named() -> None:
    assert view(x_consumer_claim="host/1/a,host/1/b").ambiguous() == "x-consumer-claim header"
    assert view(x_consumer_claim="host/1/a").ambiguous() is None


@pytest.mark.parametrize(
    "query", [f"token={TOKEN}&token={TOKEN}", f"token=wrong&token={TOKEN}", f"token={TOKEN}&token="]
)
def test_a_push_with_two_tokens_is_refused_on_both_servings(
    served: tuple[Flask, Engine], query: str
) -> None:
    """Neither the first value (Flask's ``args.get``) nor the last wins: 400, nothing stored."""
    app, engine = served
    response = app.test_client().post(f"/push?{query}", data=PUSH)
    assert response.status_code == 400
    assert response.get_json()["error"] == REPEATED_TOKEN
    status, answer = asgi_post(bridged(app), "/push", query, PUSH)
    assert (status, answer["error"]) == (400, REPEATED_TOKEN)
    assert stored(engine) == 0


def test_one_token_still_pushes(served: tuple[Flask, Engine]) -> None:
    app, engine = served
    response = app.test_client().post(f"/push?token={TOKEN}", data=PUSH)
    assert response.status_code == 200
    status, _ = asgi_post(bridged(app), "/push", f"token={TOKEN}", PUSH)
    assert status == 200
    assert stored(engine) == 1


def test_a_report_with_two_claims_is_refused_before_its_target_is_asked(
    settings: Settings,
) -> None:
    """``reports=None`` refuses every report 401: the 400 comes first, from the view alone."""
    gate = Gate(settings, allow_all)
    headers = {"x-consumer-claim": "host/1/aaaa,host/1/bbbb"}
    with pytest.raises(BadRequest, match="repeated x-consumer-claim header: it must be sent once"):
        gate.admit(RequestView("POST", "/jobs/1/heartbeat", "", headers))


def test_an_underscore_header_is_not_its_dashed_twin() -> None:
    """On the bridge's side of the door (the scope, and the environ it hands the app), as
    gunicorn's sync worker and Werkzeug's server do."""
    scope = {
        "type": "http", "method": "POST", "path": "/ticks/sweep", "query_string": b"",
        "headers": [(b"x_consumer_signature", b"v1=00"), (b"authorization_", b"Bearer x"),
                    (b"X-Consumer-Timestamp", b"1")],
    }  # fmt: skip
    seen = RequestView.of_scope(scope)
    assert dict(seen.headers) == {"x-consumer-timestamp": "1"}
    environ = wsgi_environ(scope, b"")
    assert "HTTP_X_CONSUMER_SIGNATURE" not in environ
    assert "HTTP_AUTHORIZATION_" not in environ
    assert environ["HTTP_X_CONSUMER_TIMESTAMP"] == "1"
