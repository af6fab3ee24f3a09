"""The Google ID-token source as it runs in production (google-auth's ID-token credentials for a
service account), its token endpoint a local issuer that signs with the push tests' key: the
target verifies the token as any Google-authenticated service would, and nothing reaches Google."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs

import google.auth.transport.requests
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.oauth2 import id_token

from bench.support.target_servers import PyTarget
from consumer.targets.auth import GoogleIdTokens
from tests.auth.tokens import CertsServer, SigningKey, claims

CALLER = "consumer@project.iam.gserviceaccount.com"
AUDIENCE = "https://orders.internal"


@pytest.fixture
def issuer(py_target: PyTarget) -> Iterator[tuple[PyTarget, SigningKey, CertsServer]]:
    """A token endpoint that answers a service account's JWT grant with an ID token for the
    audience it asked for, signed like Google's."""
    key = SigningKey("issuer-key")

    def grant(handler: BaseHTTPRequestHandler) -> None:
        form = parse_qs(py_target.received[-1].body.decode())
        payload = form["assertion"][0].split(".")[1]
        asked = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        token = key.sign(claims(aud=asked["target_audience"], email=CALLER))
        body = json.dumps({"id_token": token}).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    py_target.replies = [grant]
    with CertsServer(key).running() as certs:
        yield py_target, key, certs


def service_account(tmp_path: Path, token_uri: str) -> Path:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    info = {
        "type": "service_account", "project_id": "project", "private_key_id": "sa-key-1",
        "private_key": pem, "client_email": CALLER, "client_id": "1", "token_uri": token_uri,
    }  # fmt: skip
    path = tmp_path / "service-account.json"
    path.write_text(json.dumps(info))
    return path


def test_the_token_is_for_the_audience_verifiable_and_cached(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    issuer: tuple[PyTarget, SigningKey, CertsServer],
) -> None:
    endpoint, _key, certs = issuer
    path = service_account(tmp_path, f"{endpoint.url}/token")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    tokens = GoogleIdTokens()
    token = tokens(AUDIENCE)
    verified = id_token.verify_token(
        token, google.auth.transport.requests.Request(), audience=AUDIENCE, certs_url=certs.url
    )
    assert verified["email"] == CALLER and verified["aud"] == AUDIENCE
    assert tokens(AUDIENCE) == token and len(endpoint.received) == 1, "cached until it expires"
