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
from concurrent.futures import Future
from typing import Any

import google.auth.exceptions
import google.auth.transport.requests
import requests
from google.oauth2 import id_token

from consumer.auth.signature import SIGNATURE_HEADER, TIMESTAMP_HEADER, signed_headers
from consumer.config.targets import TargetAuth
from consumer.errors import Retryable

TokenSource = Callable[[str, float], str]
"""An ID token (a JWT) for an audience, by a monotonic deadline."""

TOKEN_REQUEST_SECONDS = 10.0
"""The longest one request of a fetch may take (google-auth allows a token endpoint 120 s): a
fetch that cannot finish leaves room for the next call to start another."""


class _CappedRequest(google.auth.transport.requests.Request):
    """google-auth's transport, each request's timeout at most ``cap`` seconds."""

    def __init__(self, session: requests.Session, cap: float) -> None:
        super().__init__(session)
        self._cap = cap

    def __call__(self, url: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        kwargs["timeout"] = self._cap if timeout is None else min(timeout, self._cap)
        return super().__call__(url, *args, **kwargs)


class GoogleIdTokens:
    """google-auth's ID-token credentials, one per audience, refreshed when no longer valid.

    A fetch (the token endpoint, the metadata server with its retries and back-off) runs on a
    thread of its own, one per audience at a time; a caller waits for it no longer than its
    call's deadline, so a slow token source never holds a worker past it. The fetch goes on
    and the next call uses its token; each of its requests ends within ``request_seconds``."""

    def __init__(self, request_seconds: float = TOKEN_REQUEST_SECONDS) -> None:
        self._request_seconds = request_seconds
        self._credentials: dict[str, google.auth.credentials.Credentials] = {}
        self._fetches: dict[str, Future[str]] = {}
        self._lock = threading.Lock()

    def __call__(self, audience: str, deadline: float) -> str:
        """A valid token by monotonic time ``deadline``; a failure to get one in time is
        transient (the metadata server, a token endpoint) or a fault an operator mends, so the
        event is retried, not killed."""
        try:
            return self._fetch(audience).result(timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            late = f"no ID token for audience {audience!r} by the call's deadline"
            raise Retryable(late) from None
        except google.auth.exceptions.GoogleAuthError as exc:
            raise Retryable(f"no ID token for audience {audience!r}: {exc}") from exc

    def _fetch(self, audience: str) -> Future[str]:
        """The kept token, or the fetch under way (started now if none is)."""
        with self._lock:
            credentials = self._credentials.get(audience)
            if credentials is not None and credentials.valid:
                done: Future[str] = Future()
                done.set_result(str(credentials.token))
                return done
            fetch = self._fetches.get(audience)
            if fetch is None:
                fetch = self._fetches[audience] = Future()
                try:
                    thread = threading.Thread(target=self._refresh, args=(audience, fetch))
                    thread.daemon = True
                    thread.start()
                except RuntimeError as exc:  # no thread to be had: the next call tries again
                    del self._fetches[audience]
                    raise Retryable(f"no ID token for audience {audience!r}: {exc}") from exc
            return fetch

    def _refresh(self, audience: str, fetch: Future[str]) -> None:
        """The fetch's thread; its own session (fetches for other audiences run beside it)."""
        credentials = self._credentials.get(audience)
        try:
            with requests.Session() as session:
                request = _CappedRequest(session, self._request_seconds)
                if credentials is None:
                    credentials = id_token.fetch_id_token_credentials(audience, request)
                if not credentials.valid:
                    credentials.refresh(request)
        except BaseException as exc:  # the waiters learn it; the next call fetches again
            with self._lock:
                del self._fetches[audience]
            fetch.set_exception(exc)
            return
        with self._lock:
            self._credentials[audience] = credentials
            del self._fetches[audience]
        fetch.set_result(str(credentials.token))


def auth_headers(
    auth: TargetAuth,
    body: bytes,
    tokens: TokenSource,
    deadline: float,
    now: Callable[[], float] = time.time,
) -> dict[str, str]:
    """The headers that authenticate one call carrying ``body``, made by monotonic time
    ``deadline`` (the call's)."""
    if auth.type == "google":
        return {"Authorization": f"Bearer {tokens(auth.audience, deadline)}"}
    if auth.type == "hmac":
        timestamp = int(now())
        signatures = [signed_headers(s, timestamp, body)[SIGNATURE_HEADER] for s in auth.secrets]
        return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: ",".join(signatures)}
    return {}
