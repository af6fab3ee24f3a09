"""HMAC-SHA256 signatures of the deploy hook. Pure: no I/O, no Flask.

The sender signs ``f"{timestamp}.".encode() + body`` (``timestamp``: Unix seconds, the raw body
bytes as sent) with a shared secret and sends::

    X-Consumer-Timestamp: 1767225600
    X-Consumer-Signature: v1=<hex digest>[,v1=<hex digest>...]

Signing the timestamp bounds the replay window to the tolerance; a replay inside it is a duplicate
in the inbox anyway. Several accepted secrets, and several signatures per request, allow rotation
without a moment where CI and the service disagree.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from consumer.errors import Unauthorized

TIMESTAMP_HEADER = "X-Consumer-Timestamp"
SIGNATURE_HEADER = "X-Consumer-Signature"
SCHEME = "v1"
MAX_SIGNATURES = 8
TIMESTAMP = re.compile(r"[0-9]{1,12}")


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>." + body`` under ``secret``."""
    payload = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode(), payload, hashlib.sha256).hexdigest()


def request_message(method: str, path: str, body: bytes) -> bytes:
    """What a request to the job API signs in place of its bare body: its method and path (below
    any mount prefix, as decoded: ``/jobs/order-42``), a newline, then the body, so a captured
    signature cannot be replayed against another key or as another operation."""
    return f"{method.upper()} {path}\n".encode() + body


def signed_headers(secret: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The headers a sender adds (used by tests and by Python senders)."""
    return {
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: f"{SCHEME}={sign(secret, timestamp, body)}",
    }


@dataclass(frozen=True)
class Verifier:
    """Checks a hook request against every accepted secret, in constant time per comparison."""

    secrets: Sequence[str]
    tolerance_seconds: int

    def verify(self, headers: Mapping[str, str], body: bytes, now: float) -> None:
        """Return if the request is signed by a known secret within the tolerance; raise
        ``Unauthorized`` otherwise. The body is not parsed before this succeeds."""
        if not self.secrets:
            raise Unauthorized("deploy hook is disabled: no secrets are configured")
        timestamp = _timestamp(_header(headers, TIMESTAMP_HEADER))
        if abs(now - timestamp) > self.tolerance_seconds:
            raise Unauthorized("timestamp is outside the allowed tolerance")
        given = _signatures(_header(headers, SIGNATURE_HEADER))
        expected = [sign(secret, timestamp, body).encode() for secret in self.secrets]
        # Every pair is compared, so the time taken does not depend on which secret matched.
        matches = [hmac.compare_digest(g, e) for g in given for e in expected]
        if not any(matches):
            raise Unauthorized("signature does not match")


def _header(headers: Mapping[str, str], name: str) -> str:
    lowered = name.lower()
    for key, value in headers.items():
        if key.lower() == lowered and value.strip():
            return value.strip()
    raise Unauthorized(f"missing {name} header")


def _timestamp(raw: str) -> int:
    """ASCII digits only: ``str.isdigit`` also takes "²" (which ``int`` refuses) and other
    scripts' digits (which ``int`` reads)."""
    if not TIMESTAMP.fullmatch(raw):
        raise Unauthorized("malformed timestamp: expected Unix seconds")
    return int(raw)


def _signatures(raw: str) -> list[bytes]:
    """The ``v1=`` values of the header; other schemes are ignored (room for a future v2)."""
    found = [value for scheme, value in _pairs(raw.split(",")) if scheme == SCHEME]
    if not found or len(found) > MAX_SIGNATURES:
        raise Unauthorized(f"malformed signature: expected {SCHEME}=<hex>")
    return [value.lower().encode() for value in found]


def _pairs(items: Iterable[str]) -> Iterable[tuple[str, str]]:
    for item in items:
        scheme, sep, value = item.strip().partition("=")
        if sep:
            yield scheme.strip(), value.strip()
