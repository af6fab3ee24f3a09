"""What the front door decided about a request's caller, carried with the request to its handler.

Authentication is decided once, on the request's one view (``consumer.http.request``), by the
front door (``consumer.http.gate``); the handler reads this decision and never looks at the
headers again to guess which scheme applied. An HMAC signature covers the body, so its check is
the one part left for after the body is read: the decision carries the verifier and the exact
header values the door saw, and ``slot_clock`` is the only way to the signed time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from consumer.auth.signature import TIMESTAMP_HEADER, Verifier
from consumer.errors import Unauthorized


class Scheme(StrEnum):
    NONE = "none"  # a probe: nothing to prove
    LOCAL = "local"  # local mode: pushes are not authenticated (logged at start)
    TOKEN = "token"  # the legacy shared ?token=
    OIDC = "oidc"  # a verified Google ID token
    HMAC = "hmac"  # signature headers present; the signature is checked over the body


@dataclass(frozen=True)
class Credentials:
    scheme: Scheme
    identity: str = ""
    """The verified account (an OIDC token's email: Pub/Sub's push account, the scheduler's, a
    job API caller's, a job target's); "" when the scheme names none (HMAC, the shared token,
    local mode)."""
    scheduled: datetime | None = None
    """The slot clock a verified OIDC tick vouches for (``X-CloudScheduler-ScheduleTime``)."""
    verifier: Verifier | None = None
    signed: Mapping[str, str] = field(default_factory=dict)
    """For HMAC: the timestamp and signature headers exactly as the door saw them."""

    def verify_body(self, body: bytes, now: datetime) -> datetime:
        """The signed time once the body is checked against the signature (HMAC), or the slot
        clock a verified token vouches for (else ``now``). ``Unauthorized`` if a signature the
        door could not yet check does not match."""
        if self.scheme is not Scheme.HMAC:
            return self.scheduled or now
        if self.verifier is None:  # never built so; refuse rather than trust
            raise Unauthorized("no signature verifier")
        self.verifier.verify(self.signed, body, now.timestamp())
        return datetime.fromtimestamp(int(self.signed[TIMESTAMP_HEADER]), UTC)


NOBODY = Credentials(Scheme.NONE)
