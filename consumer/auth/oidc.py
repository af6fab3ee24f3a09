"""Verify the OIDC token Pub/Sub signs each push with (docs/architecture.md §5).

Order matters for cost: the token's shape and header are checked first (no network, no crypto),
then the signature, ``exp`` and ``iat`` (google-auth, with a small clock skew), then the claims
google-auth leaves to us: ``iss``, ``email_verified`` and the ``email`` allowlist. The audience is
compared with the configured value, never with the request URL (it differs behind a load balancer).

Every refusal says only "invalid token" to the caller; the reason is logged, without the token.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

from google.auth import exceptions
from google.oauth2 import id_token

from consumer.auth.certs import CachedCerts
from consumer.config.settings import Settings
from consumer.errors import ConsumerError, Forbidden, Unauthorized

log = logging.getLogger("consumer.auth")

ISSUERS = frozenset({"accounts.google.com", "https://accounts.google.com"})
ALGORITHM = "RS256"
MAX_TOKEN_LENGTH = 8192
JWT_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
VERIFIED_TOKENS_KEPT = 256
"""Tokens whose verification is remembered. Pub/Sub reuses one token for many pushes (about an
hour): without this, every push paid an RSA signature check. Only tokens that passed are kept,
so a caller cannot fill it."""
# Everything google-auth raises for a bad token (MalformedError and InvalidValue are ValueErrors);
# the rest cover claims of the wrong type in a token that is otherwise correctly signed, and a
# deeply nested payload (json.loads raises RecursionError before the signature is checked).
VERIFY_ERRORS = (
    exceptions.GoogleAuthError, ValueError, TypeError, KeyError, OverflowError, RecursionError,
)  # fmt: skip


class TokenRefused(Exception):
    """Why a token was refused: logged, never sent to the caller."""


class OidcAuthenticator:
    """Accept a push only if Pub/Sub signed it as an allowed account for our audience."""

    def __init__(
        self,
        audience: str,
        accounts: Iterable[str],
        certs: CachedCerts,
        clock_skew_seconds: int = 30,
    ) -> None:
        self.audience = audience
        self.accounts = frozenset(account.strip().lower() for account in accounts)
        self.certs = certs
        self.clock_skew_seconds = clock_skew_seconds
        self._verified: dict[str, tuple[float, str, Mapping[str, Any]]] = {}
        """Verified token -> (until when it stays valid, its key id, its claims)."""

    @classmethod
    def from_settings(cls, settings: Settings) -> OidcAuthenticator:
        return cls(
            audience=settings.auth.push_audience,
            accounts=settings.auth.push_service_accounts,
            certs=CachedCerts(settings.auth.oidc_certs_url),
            clock_skew_seconds=settings.auth.oidc_clock_skew_seconds,
        )

    def __call__(self, headers: Mapping[str, str], query: Mapping[str, str]) -> None:
        self.identity(headers)

    def identity(self, headers: Mapping[str, str]) -> str:
        """The verified, allowed account the token names; ``Unauthorized``/``Forbidden``."""
        claims = self.claims_of(headers)
        email = str(claims.get("email", "")).lower()
        if email not in self.accounts:
            log.warning("push refused: account not allowed", extra={"email": email})
            raise Forbidden("this caller may not push here")
        return email

    def claims_of(self, headers: Mapping[str, str]) -> Mapping[str, Any]:
        """The verified claims, or ``Unauthorized``. Any unexpected exception (a verifier bug a
        crafted token found) is a refusal too, never a 500 for an unauthenticated caller;
        ``Unavailable`` (no certificates to check against) stays a 503."""
        token = ""
        try:
            token = bearer_token(headers)
            return self.verify(token)
        except TokenRefused as reason:
            log.warning("push refused: invalid token", extra={"reason": str(reason)})
        except ConsumerError:
            raise
        except Exception as exc:
            why = redact(f"{type(exc).__name__}: {exc}"[:500], token)
            log.error("push refused: token verification failed", extra={"reason": why})
        raise Unauthorized("missing or invalid token") from None

    def verify(self, token: str) -> Mapping[str, Any]:
        """The verified claims of ``token``; ``TokenRefused`` with the reason otherwise. A token
        verified before is accepted again until its ``exp`` plus the skew, as google-auth would;
        the certificates are kept fresh either way."""
        remembered = self._verified.get(token)
        if remembered is not None and time.time() <= remembered[0]:
            self.certs.ensure(remembered[1])
            return remembered[2]
        header = unverified_header(token)
        self.certs.ensure(header["kid"])
        claims = self._signed_claims(token)
        if len(self._verified) >= VERIFIED_TOKENS_KEPT:
            self._verified.clear()
        valid_until = float(claims["exp"]) + self.clock_skew_seconds
        self._verified[token] = (valid_until, header["kid"], claims)
        return claims

    def _signed_claims(self, token: str) -> Mapping[str, Any]:
        try:
            claims = id_token.verify_token(
                token,
                self.certs,
                audience=self.audience,
                certs_url=self.certs.url,
                clock_skew_in_seconds=self.clock_skew_seconds,
            )
        except VERIFY_ERRORS as exc:
            raise TokenRefused(redact(f"{type(exc).__name__}: {exc}", token)) from None
        check_claims(claims)
        return claims


def bearer_token(headers: Mapping[str, str]) -> str:
    """The JWT of the ``Authorization: Bearer`` header, if it has a JWT's shape."""
    value = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
    scheme, _, token = value.strip().partition(" ")
    if not value:
        raise TokenRefused("no Authorization header")
    if scheme.lower() != "bearer":
        raise TokenRefused("Authorization scheme is not Bearer")
    token = token.strip()
    if len(token) > MAX_TOKEN_LENGTH or not JWT_SHAPE.fullmatch(token):
        raise TokenRefused("Authorization value is not a JWT")
    return token


def unverified_header(token: str) -> dict[str, Any]:
    """The JOSE header, refused unless ``alg`` is RS256 and a ``kid`` names the key.

    google-auth already refuses ``none`` and HS256, but pinning the one algorithm Google uses
    closes algorithm confusion for good, whatever verifiers a later google-auth adds.
    """
    segment = token.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (binascii.Error, UnicodeDecodeError, ValueError, RecursionError):
        raise TokenRefused("token header is not base64url JSON") from None
    if not isinstance(header, dict):
        raise TokenRefused("token header is not a JSON object")
    if header.get("alg") != ALGORITHM:
        raise TokenRefused(f"token algorithm {str(header.get('alg'))[:20]!r} is not {ALGORITHM}")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid or len(kid) > 200:
        raise TokenRefused("token header has no key id")
    return header


def check_claims(claims: Mapping[str, Any]) -> None:
    """The checks google-auth does not do: the issuer and a verified email."""
    if claims.get("iss") not in ISSUERS:
        raise TokenRefused(f"issuer {str(claims.get('iss'))[:100]!r} is not Google")
    if claims.get("email_verified") is not True:
        raise TokenRefused("email_verified is not true")
    if not isinstance(claims.get("email"), str):
        raise TokenRefused("token has no email claim")


def redact(text: str, token: str) -> str:
    """Remove the token and each of its segments from ``text`` (google-auth quotes them)."""
    for secret in (token, *token.split(".")):
        if len(secret) >= 8:
            text = text.replace(secret, "[redacted]")
    return text
