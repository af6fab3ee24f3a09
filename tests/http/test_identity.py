"""The door's decision travels with the request: the scheme, the identity it verified and the
slot clock it vouches for are in the admission the delivery handler reads, the same on the plain
app and through the bridge, so no handler asks again. In process on SQLite, with a local
Google-like issuer (``tests.auth.tokens``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from flask import Flask

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.http.app import create_app
from consumer.http.credentials import Credentials, Scheme
from consumer.http.deliveries import Deliveries
from consumer.http.gate import Admission
from consumer.http.wsgi import bridged
from consumer.service import Service
from tests.auth.tokens import ACCOUNT, AUDIENCE, CertsServer, SigningKey, claims
from tests.http.conftest import SCHEDULER, SECRET, TICK_AUDIENCE

SCHEDULED = "2026-01-05T09:00:00Z"


@pytest.fixture
def app(sqlite_url: str, certs_server: CertsServer) -> Iterator[Flask]:
    settings = Settings.of(
        database_url=sqlite_url, push_audience=AUDIENCE, push_service_accounts=(ACCOUNT,),
        oidc_certs_url=certs_server.url, tick_hook_secrets=(SECRET,),
        tick_hook_audience=TICK_AUDIENCE, tick_hook_service_accounts=(SCHEDULER,),
    )  # fmt: skip
    engine = make_engine(sqlite_url)
    yield create_app(Service.of(settings, engine))
    engine.dispose()


def admitted(
    app: Flask, monkeypatch: pytest.MonkeyPatch, path: str, headers: dict[str, str]
) -> list[Admission]:
    """The admission the delivery handler was given, once through the plain app and once
    through the bridge."""
    seen: list[Admission] = []
    answer = Deliveries.answer

    def recording(self: Deliveries, admission: Admission, environ: dict[str, Any]) -> Any:
        seen.append(admission)
        return answer(self, admission, environ)

    monkeypatch.setattr(Deliveries, "answer", recording)
    app.test_client().post(path, data=b"{}", headers=headers)
    scope = {
        "type": "http", "method": "POST", "path": path, "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        + [(b"content-length", b"2")],
        "http_version": "1.1", "scheme": "http", "root_path": "",
        "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 40000),
    }  # fmt: skip
    incoming = [{"type": "http.request", "body": b"{}", "more_body": False}]

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        return None

    asyncio.run(bridged(app)(scope, receive, send))
    return seen


def test_a_push_carries_the_account_its_token_verified(
    app: Flask, google_key: SigningKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = google_key.sign(claims())
    seen = admitted(app, monkeypatch, "/push", {"Authorization": f"Bearer {token}"})
    assert [a.credentials for a in seen] == [Credentials(Scheme.OIDC, ACCOUNT)] * 2


def test_a_scheduler_tick_carries_its_account_and_slot_clock(
    app: Flask, google_key: SigningKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = google_key.sign(claims(aud=TICK_AUDIENCE, email=SCHEDULER))
    headers = {"Authorization": f"Bearer {token}", "X-CloudScheduler-ScheduleTime": SCHEDULED}
    seen = admitted(app, monkeypatch, "/ticks/sweep", headers)
    expected = Credentials(Scheme.OIDC, SCHEDULER, datetime(2026, 1, 5, 9, tzinfo=UTC))
    assert [a.credentials for a in seen] == [expected] * 2


def test_a_signed_tick_names_no_identity_and_carries_what_was_signed(
    app: Flask, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its slot clock is the signed timestamp, read once the body is verified."""
    headers = {"X-Consumer-Timestamp": "1767600000", "X-Consumer-Signature": "v1=" + "ab" * 32}
    seen = admitted(app, monkeypatch, "/ticks/sweep", headers)
    for admission in seen:
        credentials = admission.credentials
        assert (credentials.scheme, credentials.identity) == (Scheme.HMAC, "")
        assert credentials.signed["X-Consumer-Timestamp"] == "1767600000"
