"""OIDC end to end: real HTTP through gunicorn workers, certs from a real local server."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from consumer.wire.envelopes_out import wrapped_body
from tests.auth.tokens import ACCOUNT, AUDIENCE, CertsServer, SigningKey, claims
from tests.conftest import Server

WORKERS = 2
pytestmark = pytest.mark.slow


def test_gunicorn_accepts_pubsub_and_refuses_the_rest(
    sqlite_url: str,
    tmp_path: Path,
    certs_server: CertsServer,
    google_key: SigningKey,
    other_key: SigningKey,
) -> None:
    env = {
        "CONSUMER_DATABASE_URL": sqlite_url,
        "CONSUMER_PUSH_AUDIENCE": AUDIENCE,
        "CONSUMER_PUSH_SERVICE_ACCOUNTS": ACCOUNT,
        "CONSUMER_OIDC_CERTS_URL": certs_server.url,
        "CONSUMER_LOG_LEVEL": "INFO",
    }
    cases = {
        google_key.sign(claims()): 200,
        other_key.sign(claims(), kid=google_key.kid): 401,
        google_key.sign(claims(aud="https://elsewhere.example.com")): 401,
        google_key.sign(claims(email="intruder@p.iam.gserviceaccount.com")): 403,
    }
    with Server(env, workers=WORKERS, output=tmp_path / "out.log") as server:
        for _ in range(5):
            for token, status in cases.items():
                response = requests.post(
                    f"{server.url}/push",
                    json=wrapped_body(data=b"x"),
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=10,
                )
                assert response.status_code == status, response.text
    assert 1 <= certs_server.fetches <= WORKERS  # cached per worker process, not per request
    output = server.text()
    assert "push refused" in output
    for token in cases:
        assert token.split(".")[2] not in output
