"""The Google ID-token source as it runs in production (google-auth's ID-token credentials for a
service account), its token endpoint a local issuer that signs with the push tests' key: the
target verifies the token as any Google-authenticated service would, and nothing reaches Google."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs

import google.auth.transport.requests
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth.compute_engine import _metadata
from google.oauth2 import id_token

from bench.support.target_servers import PyTarget
from consumer.config.targets import target
from consumer.errors import Retryable
from consumer.targets.auth import GoogleIdTokens
from consumer.targets.call import Caller
from consumer.targets.cloudevent import for_event
from consumer.wire.events import TickEvent
from consumer.wire.message import PushMessage
from consumer.wire.schedule import Every
from tests.auth.tokens import CertsServer, SigningKey, claims
from tests.targets.metadata_server import MetadataServer

CALLER = "consumer@project.iam.gserviceaccount.com"
AUDIENCE = "https://orders.internal"
SLOW_SECONDS = 2.5
"""How long a slow token source takes to answer: longer than the call may wait, shorter than
google-auth's 3 s timeout for the metadata server (it would ask again)."""


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


@pytest.fixture
def key_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    issuer: tuple[PyTarget, SigningKey, CertsServer],
) -> tuple[PyTarget, CertsServer]:
    """The issuer as the token endpoint of the service account that
    ``GOOGLE_APPLICATION_CREDENTIALS`` names."""
    endpoint, _key, certs = issuer
    path = service_account(tmp_path, f"{endpoint.url}/token")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    return endpoint, certs


def test_the_token_is_for_the_audience_verifiable_and_cached(
    key_file: tuple[PyTarget, CertsServer],
) -> None:
    endpoint, certs = key_file
    tokens = GoogleIdTokens()
    token = tokens(AUDIENCE, time.monotonic() + 10)
    verified = id_token.verify_token(
        token, google.auth.transport.requests.Request(), audience=AUDIENCE, certs_url=certs.url
    )
    assert verified["email"] == CALLER and verified["aud"] == AUDIENCE
    assert tokens(AUDIENCE, time.monotonic() + 10) == token and len(endpoint.received) == 1, (
        "cached until it expires"
    )


def test_a_slow_token_endpoint_does_not_hold_the_call_past_its_deadline(
    key_file: tuple[PyTarget, CertsServer],
) -> None:
    endpoint, certs = key_file
    grant = endpoint.replies[0]
    assert callable(grant)
    endpoint.replies = [lambda handler: (time.sleep(SLOW_SECONDS), grant(handler))]
    bounded_then_kept(certs, lambda: len(endpoint.received))


def test_each_request_of_a_fetch_ends_at_its_cap(key_file: tuple[PyTarget, CertsServer]) -> None:
    """google-auth gives a token endpoint 120 s; a fetch's request ends at its cap instead, so a
    call with time to spare is not kept waiting on an endpoint that will not answer."""
    endpoint, _certs = key_file
    grant = endpoint.replies[0]
    assert callable(grant)
    endpoint.replies = [lambda handler: (time.sleep(SLOW_SECONDS), grant(handler))]
    tokens = GoogleIdTokens(request_seconds=1.0)
    started = time.monotonic()
    with pytest.raises(Retryable, match="no ID token"):
        tokens(AUDIENCE, time.monotonic() + 10)
    elapsed = time.monotonic() - started
    assert elapsed < SLOW_SECONDS - 0.5, f"the fetch waited {elapsed:.1f}s past its 1s cap"


def test_a_slow_metadata_server_does_not_hold_the_call_past_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No key file: google-auth detects the metadata server (``GCE_METADATA_IP``, its host read
    once at import, so set here as the environment would have set it) and asks its identity
    endpoint, which takes longer than the call may."""
    key = SigningKey("metadata-key")
    server = MetadataServer(
        CALLER, lambda audience: key.sign(claims(aud=audience, email=CALLER)), SLOW_SECONDS
    )
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    with CertsServer(key).running() as certs, server.running() as metadata:
        monkeypatch.setenv("GCE_METADATA_IP", metadata.host)
        monkeypatch.setattr(_metadata, "_GCE_METADATA_HOST", metadata.host)
        bounded_then_kept(certs, lambda: metadata.identities)


def bounded_then_kept(certs: CertsServer, fetches: Callable[[], int]) -> None:
    """A call with 1.5 s to go is back by then, retried (the worker is not held); the fetch goes
    on without it, and the next call carries the token it brought, verifiable for the audience."""
    with PyTarget().running() as orders:
        caller = google_caller(orders.url)
        started = time.monotonic()
        with pytest.raises(Retryable, match="by the call's deadline"):
            call(caller, seconds=1.5)
        assert time.monotonic() - started < 1.5, "the token fetch outlived the call's deadline"
        assert not orders.received
        time.sleep(SLOW_SECONDS)
        assert call(caller, seconds=1.5)["status"] == 200
    (got,) = orders.received
    token = got.headers["Authorization"].removeprefix("Bearer ")
    request = google.auth.transport.requests.Request()
    verified = id_token.verify_token(token, request, audience=AUDIENCE, certs_url=certs.url)
    assert verified["email"] == CALLER
    assert fetches() == 1, "one fetch, its token kept"


def google_caller(url: str) -> Caller:
    spec = target(
        "orders", url=url, serves={"tick": "process-pending", "period_seconds": 60},
        auth={"type": "google", "audience": AUDIENCE}, timeout_seconds=1,
    )  # fmt: skip
    return Caller(spec, GoogleIdTokens())


def call(caller: Caller, seconds: float) -> dict[str, object]:
    deadline = time.monotonic() + seconds
    slot = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    event = TickEvent("process-pending", slot, Every(60), PushMessage("m1", publish_time=slot))
    return caller.call(for_event(event, event.key), lambda: deadline - time.monotonic())
