"""Mint ID tokens the way Google does (RS256, ``kid``), plus the forgeries attackers try, and
serve the signing certificates as Google's ``{kid: certificate PEM}`` document over real HTTP."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

AUDIENCE = "https://consumer.example.com/push"
ACCOUNT = "pubsub-push@project.iam.gserviceaccount.com"


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def segment(value: Any) -> str:
    return b64url(json.dumps(value).encode())


@dataclass
class SigningKey:
    """An RSA key with a self-signed certificate, as Google publishes its keys."""

    kid: str
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )

    @cached_property
    def certificate_pem(self) -> str:
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "securetoken.test")])
        now = datetime.now(UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1))
            .not_valid_after(now + timedelta(days=1))
            .sign(self.key, hashes.SHA256())
        )
        return certificate.public_bytes(serialization.Encoding.PEM).decode()

    @property
    def public_pem(self) -> bytes:
        return self.key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def sign(self, claims: dict[str, Any], **header: Any) -> str:
        head = segment({"alg": "RS256", "kid": self.kid, "typ": "JWT", **header})
        signed = f"{head}.{segment(claims)}".encode()
        signature = self.key.sign(signed, padding.PKCS1v15(), hashes.SHA256())
        return f"{signed.decode()}.{b64url(signature)}"

    def hs256_with_public_key(self, claims: dict[str, Any]) -> str:
        """Algorithm confusion: HMAC-SHA256 keyed with the (public) verification key."""
        signed = f"{segment({'alg': 'HS256', 'kid': self.kid})}.{segment(claims)}".encode()
        digest = hmac.new(self.public_pem, signed, hashlib.sha256).digest()
        return f"{signed.decode()}.{b64url(digest)}"


def unsigned(claims: dict[str, Any], kid: str = "") -> str:
    """``alg: none``: no signature at all."""
    header = {"alg": "none", **({"kid": kid} if kid else {})}
    return f"{segment(header)}.{segment(claims)}."


def claims(**changes: Any) -> dict[str, Any]:
    """Claims exactly like a Pub/Sub push token's, valid for an hour from now."""
    now = int(time.time())
    base = {
        "aud": AUDIENCE,
        "azp": "1234567890",
        "email": ACCOUNT,
        "email_verified": True,
        "exp": now + 3600,
        "iat": now,
        "iss": "https://accounts.google.com",
        "sub": "1234567890",
    }
    base.update(changes)
    return {key: value for key, value in base.items() if value is not None}


class CertsServer:
    """A real HTTP server on loopback serving ``{kid: PEM}``; counts the fetches."""

    def __init__(self, *keys: SigningKey, max_age: int = 3600) -> None:
        self.document: dict[str, str] = {key.kid: key.certificate_pem for key in keys}
        self.max_age = max_age
        self.status = 200
        self.fetches = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/oauth2/v1/certs"

    def publish(self, *keys: SigningKey) -> None:
        self.document = {key.kid: key.certificate_pem for key in keys}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.fetches += 1
                body = json.dumps(server.document).encode()
                self.send_response(server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Cache-Control", f"public, max-age={server.max_age}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        return Handler

    @contextmanager
    def running(self) -> Iterator[CertsServer]:
        thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
            thread.join()
