"""Google's OIDC signing certificates (``{kid: certificate PEM}``), fetched once and cached.

Certificates must not be fetched per request: that would add a network round trip to every push
and let anyone on the internet make us hammer Google. The document is kept for the response's
``max-age`` (bounded), refetched early when a token names a key we do not have (Google rotates its
keys) but at most once per ``refetch_interval``, and the last good copy is kept when a refetch
fails. With no copy at all, a failed fetch is retried at most once per ``failure_backoff`` (a
503 at once meanwhile). ``CachedCerts`` is also the transport handed to
``google.oauth2.id_token.verify_token``, which therefore reads the cache, never the network.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import google.auth.transport
import google.auth.transport.requests
from google.auth import exceptions

from consumer.errors import Unavailable
from consumer.observe import metrics

log = logging.getLogger("consumer.certs")

FETCH_TIMEOUT_SECONDS = 5.0
DEFAULT_TTL_SECONDS = 3600.0
MIN_TTL_SECONDS = 60.0
MAX_TTL_SECONDS = 24 * 3600.0
REFETCH_INTERVAL_SECONDS = 60.0
FAILURE_BACKOFF_SECONDS = 10.0
"""With no document yet, a failed fetch is not retried sooner: meanwhile every push is a 503 at
once, instead of each one waiting on its own slow fetch under the lock."""
MAX_AGE = re.compile(r"max-age=(\d+)")


class CachedResponse(google.auth.transport.Response):
    """The cached document, shaped as the google-auth transport response ``verify_token`` reads."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    @property
    def status(self) -> int:
        return 200

    @property
    def headers(self) -> Mapping[str, str]:
        return {"content-type": "application/json"}

    @property
    def data(self) -> bytes:
        return self._data


class CachedCerts(google.auth.transport.Request):
    """One certs URL's document, refreshed by ``ensure(kid)`` and served by ``__call__``."""

    def __init__(
        self,
        url: str,
        transport: google.auth.transport.Request | None = None,
        clock: Callable[[], float] = time.monotonic,
        refetch_interval: float = REFETCH_INTERVAL_SECONDS,
        failure_backoff: float = FAILURE_BACKOFF_SECONDS,
    ) -> None:
        self.url = url
        self._transport = transport or google.auth.transport.requests.Request()
        self._clock = clock
        self._refetch_interval = refetch_interval
        self._lock = threading.Lock()
        self._document = b""
        self._kids: frozenset[str] = frozenset()
        self._expires = 0.0
        self._fetched = float("-inf")
        self._failure_backoff = failure_backoff
        self._retry_at = float("-inf")
        self.fetches = 0

    def ensure(self, kid: str) -> None:
        """Make the cache fresh enough to verify a token signed with ``kid``."""
        with self._lock:
            now = self._clock()
            expired = now >= self._expires
            rotated = kid not in self._kids and now - self._fetched >= self._refetch_interval
            if not self._document and now < self._retry_at:
                raise Unavailable("cannot fetch the OIDC signing certificates (backing off)")
            if not self._document or expired or rotated:
                self._refresh(now)

    def __call__(self, url: str, method: str = "GET", *args: Any, **kwargs: Any) -> CachedResponse:
        """The google-auth transport: answers the certs URL from the cache, nothing else."""
        if url != self.url or method != "GET" or not self._document:
            raise exceptions.TransportError("only the cached certs URL can be fetched")
        return CachedResponse(self._document)

    def _refresh(self, now: float) -> None:
        self._fetched = now
        self.fetches += 1
        try:
            document, kids, ttl = self._fetch()
        except (exceptions.TransportError, ValueError) as exc:
            metrics.cert_fetch_failed()
            if not self._document:
                self._retry_at = self._clock() + self._failure_backoff
                log.error("cannot fetch OIDC certificates", extra={"reason": str(exc)})
                raise Unavailable("cannot fetch the OIDC signing certificates") from None
            log.warning("keeping cached OIDC certificates", extra={"reason": str(exc)})
            self._expires = now + self._refetch_interval
            return
        self._document, self._kids, self._expires = document, kids, now + ttl

    def _fetch(self) -> tuple[bytes, frozenset[str], float]:
        response = self._transport(self.url, method="GET", timeout=FETCH_TIMEOUT_SECONDS)
        if response.status != 200:
            raise ValueError(f"certs URL answered HTTP {response.status}")
        kids = parse_certs(response.data)
        return response.data, kids, ttl_from(response.headers)


def parse_certs(data: bytes) -> frozenset[str]:
    """The key ids of a ``{kid: certificate PEM}`` document; ``ValueError`` for anything else.

    The JWK-set format is refused on purpose: google-auth would hand it to PyJWT, which skips the
    configured clock skew (and is not installed).
    """
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        raise ValueError("certs document is not JSON") from None
    if not isinstance(document, dict) or not document:
        raise ValueError("certs document must be a non-empty {kid: PEM} object")
    if not all(isinstance(pem, str) and "BEGIN" in pem for pem in document.values()):
        raise ValueError("certs document values must be PEM certificates")
    return frozenset(document)


def ttl_from(headers: Mapping[str, str]) -> float:
    """Seconds to keep the document: ``Cache-Control: max-age``, bounded."""
    lowered = {key.lower(): value for key, value in headers.items()}
    match = MAX_AGE.search(lowered.get("cache-control", ""))
    seconds = float(match.group(1)) if match else DEFAULT_TTL_SECONDS
    return min(max(seconds, MIN_TTL_SECONDS), MAX_TTL_SECONDS)
