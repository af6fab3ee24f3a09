"""Finding "Anyone can run any tick task", its second half: the forged tick took the slot, and
the genuine signed tick for that slot then answered ``duplicate`` and never ran.

On PostgreSQL, in process through the ASGI bridge (what ``consumer serve`` runs) and the plain
WSGI app, sharing one database: the forged requests of the finding go first, then the tick the
scheduler really signed. The forged ones change nothing; the genuine one runs, once. Only what
every version of the service has is used (``create_app``, ``bridged``, the registry's ``tick``),
so this fails on the code before the front door and passes after."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import Engine, func, select

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.http.app import create_app
from consumer.http.wsgi import bridged
from consumer.inbox.schema import inbox
from consumer.service import Service
from tests.auth.tokens import CertsServer, SigningKey, claims
from tests.http.conftest import SCHEDULER, SECRET, TICK_AUDIENCE
from tests.support.asgi import asgi_post

pytestmark = pytest.mark.postgres
TASK = "counted"
PERIOD = 3600
"""One slot an hour: the forged ticks and the genuine one fall in the same slot."""
BODY = json.dumps({"task": TASK}).encode()


@pytest.fixture
def served(
    postgres_url: str, certs_server: CertsServer
) -> Iterator[tuple[Flask, Engine, list[str]]]:
    """The app with the task ``counted``, which records each slot it is run for."""
    settings = Settings.of(
        database_url=postgres_url, push_token="push-token-0123456789abcdef",
        tick_hook_secrets=(SECRET,), tick_hook_audience=TICK_AUDIENCE,
        tick_hook_service_accounts=(SCHEDULER,), oidc_certs_url=certs_server.url,
    )  # fmt: skip
    engine = make_engine(postgres_url)
    service = Service.of(settings, engine)
    calls: list[str] = []

    def counted(context: Any, event: Any) -> dict[str, Any]:
        calls.append(event.slot.isoformat())
        return {"ran": True}

    service.registry.tick(TASK, period_seconds=PERIOD)(counted)
    yield create_app(service), engine, calls
    engine.dispose()


def stored(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(inbox)).scalar_one())


def inside_one_slot() -> int:
    """Now, at least 20 s from either end of its slot (the requests all land in it)."""
    now = time.time()
    if now % PERIOD > PERIOD - 20 or now % PERIOD < 20:
        time.sleep(40 - (now + 20) % PERIOD)
    return int(time.time())


def signed(at: int, body: bytes) -> tuple[tuple[bytes, bytes], ...]:
    """The scheduler's own signature (docs/ticks.md: HMAC-SHA256 of ``"<timestamp>." + body``)."""
    digest = hmac.new(SECRET.encode(), f"{at}.".encode() + body, hashlib.sha256).hexdigest()
    return ((b"x-consumer-timestamp", str(at).encode()),
            (b"x-consumer-signature", f"v1={digest}".encode()))  # fmt: skip


def test_the_genuine_signed_tick_runs_after_the_forged_ones(
    served: tuple[Flask, Engine, list[str]],
) -> None:
    app, engine, calls = served
    now = inside_one_slot()
    junk = ((b"x-consumer-timestamp", str(now).encode()),
            (b"x-consumer-signature", b"v1=" + b"ab" * 32))  # fmt: skip
    forged_token = SigningKey("not-googles").sign(claims(aud=TICK_AUDIENCE, email=SCHEDULER))
    path = f"/ticks/{TASK}"
    forged = [
        # two Authorization headers, the last empty, junk signature headers (the finding's)
        asgi_post(bridged(app), path, "", BODY,
                  ((b"authorization", b"Bearer x"), (b"authorization", b""), *junk))[0],
        # the one header the plain app's view saw for that pair
        asgi_post(bridged(app), path, "", BODY, ((b"authorization", b"Bearer x,"), *junk))[0],
        # a lower-case method with a token no Google key signed
        app.test_client().open(path, method="post", data=BODY,
                               headers={"Authorization": f"Bearer {forged_token}"}).status_code,
        app.test_client().open(path, method="post", data=BODY, headers=[
            ("Authorization", "Bearer x"), ("Authorization", ""),
            ("X-Consumer-Timestamp", str(now)), ("X-Consumer-Signature", "v1=" + "ab" * 32),
        ]).status_code,
    ]  # fmt: skip
    forged_stored, forged_calls = stored(engine), list(calls)
    status, answer = asgi_post(bridged(app), path, "", BODY, signed(now, BODY))
    assert (status, answer["outcome"]) == (200, "done"), answer  # was 200 duplicate
    assert len(calls) == 1
    assert (forged_stored, forged_calls) == (0, [])
    assert all(status >= 400 for status in forged), forged  # were 200, 401, 200, 200
    assert stored(engine) == 1
