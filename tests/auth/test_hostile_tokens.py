"""Tokens built to crash the verifier rather than to pass it: a deeply nested JSON header or
payload makes ``json.loads`` raise ``RecursionError``. Each must be a plain 401, never a 500, and
the refusal is logged without the token."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

import pytest
from flask.testing import FlaskClient

from consumer.auth.certs import CachedCerts
from consumer.auth.oidc import OidcAuthenticator, TokenRefused
from consumer.config.settings import Settings
from consumer.errors import Unauthorized
from consumer.wire.envelopes_out import wrapped_body
from tests.auth.tokens import SigningKey, b64url, claims, segment

REFUSAL = {"outcome": "rejected", "key": "", "error": "missing or invalid token"}
NESTED = b64url(b"[" * 1100)
SIGNATURE = b64url(b"not a signature")


def push(client: FlaskClient, token: str) -> tuple[int, object]:
    headers = {"Authorization": f"Bearer {token}"}
    response = client.post("/push", json=wrapped_body(data=b"x"), headers=headers)
    return response.status_code, response.json


def nested_payload(key: SigningKey) -> str:
    return f"{segment({'alg': 'RS256', 'kid': key.kid, 'typ': 'JWT'})}.{NESTED}.{SIGNATURE}"


def test_a_deeply_nested_header_gets_401(client: FlaskClient) -> None:
    assert push(client, f"{NESTED}.{segment(claims())}.{SIGNATURE}") == (401, REFUSAL)


def test_a_deeply_nested_payload_gets_401(client: FlaskClient, google_key: SigningKey) -> None:
    assert push(client, nested_payload(google_key)) == (401, REFUSAL)


def test_a_deeply_nested_payload_is_an_ordinary_refusal(
    oidc_settings: Settings, google_key: SigningKey
) -> None:
    """google-auth's RecursionError is one of the expected errors, not a verifier bug."""
    with pytest.raises(TokenRefused, match="RecursionError"):
        OidcAuthenticator.from_settings(oidc_settings).verify(nested_payload(google_key))


class Exploding(OidcAuthenticator):
    """A verifier with a bug nobody has found yet."""

    def verify(self, token: str) -> Mapping[str, object]:
        raise RuntimeError(f"unexpected failure while reading {token}")


def test_any_unexpected_verification_error_is_a_401_logged_without_the_token(
    google_key: SigningKey, caplog: pytest.LogCaptureFixture
) -> None:
    authenticate = Exploding("aud", ["a@b"], CachedCerts("http://127.0.0.1:9/certs"))
    token = google_key.sign(claims())
    with caplog.at_level(logging.INFO, logger="consumer"), pytest.raises(Unauthorized):
        authenticate({"Authorization": f"Bearer {token}"}, {})
    logged = "\n".join(json.dumps(vars(record), default=str) for record in caplog.records)
    assert "RuntimeError" in logged
    assert all(part not in logged for part in token.split("."))
