"""A stand-in for IAP: ES256 keys, a real HTTP server publishing them as a JWK set (the format of
``https://www.gstatic.com/iap/verify/public_key-jwk``), and assertions signed like IAP's."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from google.auth import crypt, jwt

AUDIENCE = "/projects/123456789/global/backendServices/987654321"
ISSUER = "https://cloud.google.com/iap"


def _b64(number: int) -> str:
    return base64.urlsafe_b64encode(number.to_bytes(32, "big")).rstrip(b"=").decode()


@dataclass
class IapKey:
    kid: str
    private: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )

    def jwk(self) -> dict[str, str]:
        numbers = self.private.public_key().public_numbers()
        return {
            "alg": "ES256", "crv": "P-256", "kid": self.kid, "kty": "EC", "use": "sig",
            "x": _b64(numbers.x), "y": _b64(numbers.y),
        }  # fmt: skip

    def sign(self, **overrides: Any) -> str:
        """An assertion as IAP makes it; ``overrides`` change or (with None) drop claims."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "aud": AUDIENCE, "iss": ISSUER, "iat": now, "exp": now + 600,
            "sub": "accounts.google.com:1234", "email": "operator@example.com",
            "hd": "example.com",
        }  # fmt: skip
        claims.update(overrides)
        claims = {k: v for k, v in claims.items() if v is not None}
        pem = self.private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        signer = crypt.ES256Signer.from_string(pem, key_id=self.kid)
        return jwt.encode(signer, claims).decode()


class KeyServer:
    """Serves ``{"keys": [...]}`` over HTTP on loopback and counts the fetches."""

    def __init__(self, keys: list[IapKey]) -> None:
        self.keys = keys
        self.fetches = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.fetches += 1
                body = json.dumps({"keys": [key.jwk() for key in owner.keys]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/public_key-jwk"


@contextmanager
def key_server(keys: list[IapKey]) -> Iterator[KeyServer]:
    server = KeyServer(keys)
    thread = threading.Thread(target=server.httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
