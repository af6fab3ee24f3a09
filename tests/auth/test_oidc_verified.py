"""A token that passed verification is not verified again on every push (Pub/Sub reuses one
for about an hour), but only until it expires."""

from __future__ import annotations

import time
from typing import Any

import pytest
from flask.testing import FlaskClient

from consumer.auth import oidc
from consumer.auth.certs import CachedCerts
from consumer.auth.oidc import OidcAuthenticator, TokenRefused
from consumer.wire.envelopes_out import wrapped_body
from tests.auth.tokens import ACCOUNT, AUDIENCE, CertsServer, SigningKey, claims


def counting_verifier(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record each signature check google-auth is asked for (it still does the check)."""
    checked: list[str] = []
    real = oidc.id_token.verify_token

    def verify_token(token: str, *args: Any, **kwargs: Any) -> Any:
        checked.append(token)
        return real(token, *args, **kwargs)

    monkeypatch.setattr(oidc.id_token, "verify_token", verify_token)
    return checked


def test_a_reused_token_is_signature_checked_once(
    client: FlaskClient, google_key: SigningKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = counting_verifier(monkeypatch)
    token = google_key.sign(claims())
    for number in range(5):
        body = wrapped_body(data=b"hello", message_id=f"reused-{number}")
        response = client.post("/push", json=body, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200
    assert checked == [token]


def test_a_remembered_token_is_refused_once_it_expires(
    google_key: SigningKey, certs_server: CertsServer
) -> None:
    authenticator = OidcAuthenticator(AUDIENCE, [ACCOUNT], CachedCerts(certs_server.url), 0)
    now = int(time.time())
    token = google_key.sign(claims(iat=now - 10, exp=now + 1))
    assert authenticator.verify(token)["email"] == ACCOUNT
    assert authenticator.verify(token)["email"] == ACCOUNT  # remembered
    while time.time() < now + 2.2:
        time.sleep(0.1)
    with pytest.raises(TokenRefused, match="expired"):
        authenticator.verify(token)
