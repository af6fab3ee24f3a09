"""Identity-Aware Proxy's signed header, verified as Google documents it.

IAP puts an ES256 JWT in ``x-goog-iap-jwt-assertion``: ``kid`` names one of the keys published as
a JWK set, ``aud`` is ``/projects/NUMBER/global/backendServices/ID``, ``iss`` is
``https://cloud.google.com/iap``, ``exp`` and ``iat`` bound it in time, ``email`` names the user.
The keys are fetched once and cached (never per request); an unknown ``kid`` refetches them at
most once a minute (Google rotates them). The JWK set is turned into PEM public keys so that
google-auth's own ``jwt.decode`` checks the signature, the times (with a skew) and the audience.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from google.auth import exceptions, jwt

from consumer.errors import Unavailable

HEADER = "x-goog-iap-jwt-assertion"
ISSUER = "https://cloud.google.com/iap"
FETCH_TIMEOUT_SECONDS = 5.0
KEYS_TTL_SECONDS = 3600.0
REFETCH_INTERVAL_SECONDS = 60.0


class AssertionRefused(Exception):
    """The assertion is missing, malformed, expired, for another audience or badly signed."""


def _b64_int(text: str) -> int:
    return int.from_bytes(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)), "big")


def jwk_to_pem(jwk: Mapping[str, Any]) -> str:
    """An EC P-256 JWK as a PEM public key; ``ValueError`` for any other key."""
    if jwk.get("kty") != "EC" or jwk.get("crv") != "P-256":
        raise ValueError("not an EC P-256 key")
    numbers = ec.EllipticCurvePublicNumbers(
        _b64_int(str(jwk["x"])), _b64_int(str(jwk["y"])), ec.SECP256R1()
    )
    key = numbers.public_key()
    pem = key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return pem.decode("ascii")


def parse_jwk_set(document: Any) -> dict[str, str]:
    """``{kid: PEM}`` of the usable keys of a JWK set; ``ValueError`` if there are none."""
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise ValueError("the IAP keys document is not a JWK set")
    pems = {}
    for jwk in keys:
        if isinstance(jwk, dict) and isinstance(jwk.get("kid"), str):
            try:
                pems[jwk["kid"]] = jwk_to_pem(jwk)
            except (ValueError, KeyError):
                continue
    if not pems:
        raise ValueError("the IAP keys document has no EC P-256 key")
    return pems


class IapVerifier:
    """Verifies IAP assertions for one audience; thread-safe, keys cached."""

    def __init__(
        self,
        audience: str,
        keys_url: str,
        clock_skew_seconds: int = 30,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.audience = audience
        self.keys_url = keys_url
        self.clock_skew_seconds = clock_skew_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str, str] = {}
        self._fetched = float("-inf")

    def email_of(self, assertion: str) -> str:
        """The verified user's email; ``AssertionRefused`` otherwise (``Unavailable``: no keys)."""
        try:
            header = jwt.decode_header(assertion)
        except (ValueError, exceptions.GoogleAuthError):
            raise AssertionRefused("malformed IAP assertion") from None
        if header.get("alg") != "ES256" or not isinstance(header.get("kid"), str):
            raise AssertionRefused("IAP assertions are ES256 with a kid")
        certs = self._keys_for(header["kid"])
        try:
            claims = jwt.decode(
                assertion, certs=certs, audience=self.audience,
                clock_skew_in_seconds=self.clock_skew_seconds,
            )  # fmt: skip
        except (ValueError, exceptions.GoogleAuthError) as exc:
            raise AssertionRefused(f"IAP assertion refused: {exc}") from None
        if claims.get("iss") != ISSUER or not isinstance(claims.get("email"), str):
            raise AssertionRefused("IAP assertion has the wrong issuer or no email")
        return str(claims["email"])

    def _keys_for(self, kid: str) -> dict[str, str]:
        with self._lock:
            now = self._clock()
            stale = now - self._fetched >= KEYS_TTL_SECONDS
            rotated = kid not in self._keys and now - self._fetched >= REFETCH_INTERVAL_SECONDS
            if not self._keys or stale or rotated:
                self._refresh(now)
            if kid not in self._keys:
                raise AssertionRefused("IAP assertion signed with an unknown key")
            return dict(self._keys)

    def _refresh(self, now: float) -> None:
        self._fetched = now
        try:
            response = requests.get(self.keys_url, timeout=FETCH_TIMEOUT_SECONDS)
            response.raise_for_status()
            self._keys = parse_jwk_set(response.json())
        except (requests.RequestException, ValueError) as exc:
            if not self._keys:
                raise Unavailable(f"cannot fetch the IAP keys: {exc}") from None
