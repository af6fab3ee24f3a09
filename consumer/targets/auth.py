"""How a call proves it comes from us: a Google ID token for the target's audience, the deploy
hook's HMAC scheme (``consumer.auth.signature``, signed with every configured secret so a
target that holds either side of a rotation accepts it), or nothing, stated explicitly.

The token source is injectable: tests pass one that signs with a local issuer. The default asks
google-auth (``GOOGLE_APPLICATION_CREDENTIALS``' service account, else the metadata server), and
keeps each audience's credentials until they expire, so a call costs no token round trip.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import google.auth.exceptions
import google.auth.transport.requests
from google.oauth2 import id_token

from consumer.auth.signature import SIGNATURE_HEADER, TIMESTAMP_HEADER, signed_headers
from consumer.config.targets import TargetAuth
from consumer.errors import Retryable

TokenSource = Callable[[str], str]
"""An ID token (a JWT) for an audience."""


class GoogleIdTokens:
    """google-auth's ID-token credentials, one per audience, refreshed when no longer valid."""

    def __init__(self) -> None:
        self._request = google.auth.transport.requests.Request()
        self._credentials: dict[str, google.auth.credentials.Credentials] = {}
        self._lock = threading.Lock()

    def __call__(self, audience: str) -> str:
        """A valid token; a failure to get one is transient (the metadata server, a token
        endpoint) or a fault an operator mends, so the event is retried, not killed."""
        try:
            with self._lock:
                credentials = self._credentials.get(audience)
                if credentials is None:
                    credentials = id_token.fetch_id_token_credentials(audience, self._request)
                    self._credentials[audience] = credentials
                if not credentials.valid:
                    credentials.refresh(self._request)
                return str(credentials.token)
        except google.auth.exceptions.GoogleAuthError as exc:
            raise Retryable(f"no ID token for audience {audience!r}: {exc}") from exc


def auth_headers(
    auth: TargetAuth, body: bytes, tokens: TokenSource, now: Callable[[], float] = time.time
) -> dict[str, str]:
    """The headers that authenticate one call carrying ``body``."""
    if auth.type == "google":
        return {"Authorization": f"Bearer {tokens(auth.audience)}"}
    if auth.type == "hmac":
        timestamp = int(now())
        signatures = [signed_headers(s, timestamp, body)[SIGNATURE_HEADER] for s in auth.secrets]
        return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: ",".join(signatures)}
    return {}
