"""One GET with retries, backoff and a hard deadline: the unit of work of the HTTP warmer.

requests' timeout bounds each socket operation, not the whole response, so each attempt runs
inside a ``Deadline`` (``consumer.outbound.deadline``) that ends it, headers or body, at its
time: a slow-dripping target cannot hold a worker past it (the session must come from
``deadline_session()``).

Redirects are followed here, within the target's origin only: a redirect to another origin is a
failed target (HTTP 3xx, not followed, not retried), so the configured headers, which may hold a
secret, go nowhere else; configure the final URL instead.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urljoin

import requests

from consumer.config.settings import Settings
from consumer.deploy.origin import same_origin
from consumer.deploy.report import TargetResult
from consumer.outbound.budget import MIN_REQUEST_SECONDS, Budget
from consumer.outbound.deadline import Deadline

CHUNK_BYTES = 64 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024
"""Reading stops here: the target has rendered the page by then, which is what warms it."""
MAX_REDIRECTS = 5
MAX_BACKOFF_SECONDS = 10.0
USER_AGENT = "consumer-cache-warmer/1"


class BodyTimeout(requests.Timeout):
    """The response body did not arrive before the deadline."""


@dataclass(frozen=True)
class HttpPolicy:
    """How targets are requested: from ``CONSUMER_WARM_*`` settings."""

    timeout_seconds: float = 5.0
    retries: int = 2
    backoff_seconds: float = 0.2
    concurrency: int = 8
    max_targets: int = 10000
    headers: Mapping[str, str] = field(default_factory=lambda: {"User-Agent": USER_AGENT})

    @classmethod
    def from_settings(cls, settings: Settings) -> HttpPolicy:
        extra = json.loads(settings.warming.headers) if settings.warming.headers.strip() else {}
        return cls(
            timeout_seconds=settings.warming.timeout_ms / 1000,
            retries=settings.warming.retries,
            backoff_seconds=settings.warming.backoff_ms / 1000,
            concurrency=settings.warming.concurrency,
            max_targets=settings.warming.max_targets,
            headers={"User-Agent": USER_AGENT, **extra},
        )

    def delay(self, attempt: int) -> float:
        """Exponential backoff with jitter before retry number ``attempt``."""
        ceiling = min(MAX_BACKOFF_SECONDS, self.backoff_seconds * 2 ** (attempt - 1))
        return ceiling * random.uniform(0.5, 1.0)


def fetch(
    session: requests.Session, url: str, policy: HttpPolicy, budget: Budget, keep: bool = False
) -> tuple[TargetResult, bytes]:
    """GET ``url`` until it answers below 400, retrying transient failures while the budget
    allows. Returns the result and, if ``keep``, the body."""
    attempt = 0
    while True:
        attempt += 1
        started = time.monotonic()
        status, error, retryable, body = _get(session, url, policy, budget, keep)
        seconds = time.monotonic() - started
        if not error:
            return TargetResult(url, True, seconds, attempt, status), body
        delay = policy.delay(attempt)
        last = attempt > policy.retries or not budget.allows(delay + MIN_REQUEST_SECONDS)
        if not retryable or last:
            return TargetResult(url, False, seconds, attempt, status, error), b""
        time.sleep(delay)


def _get(
    session: requests.Session, url: str, policy: HttpPolicy, budget: Budget, keep: bool
) -> tuple[int | None, str, bool, bytes]:
    """One attempt: (status, error or "", whether a retry may help, body)."""
    timeout = budget.timeout(policy.timeout_seconds)
    deadline = Deadline(time.monotonic() + timeout)
    try:
        with deadline:
            status, elsewhere, body = _follow(session, url, policy.headers, deadline, keep)
    except (requests.RequestException, ValueError) as exc:  # ValueError: a malformed Location
        return None, *_failure(exc, timeout, deadline.expired), b""
    if elsewhere:
        error = f"HTTP {status} to another origin, not followed: {elsewhere}"
        return status, error[:500], False, b""
    if status >= 400:
        return status, f"HTTP {status}", status == 429 or status >= 500, b""
    return status, "", False, body


def _failure(exc: Exception, timeout: float, expired: bool) -> tuple[str, bool]:
    """What an attempt that raised ``exc`` comes to: (error, whether a retry may help). Any
    failure once the deadline has shut the connection is the deadline's."""
    if expired or isinstance(exc, requests.Timeout):
        return f"timed out after {timeout:.2f}s ({type(exc).__name__})", True
    transient = isinstance(exc, requests.ConnectionError | requests.exceptions.ChunkedEncodingError)
    return f"{type(exc).__name__}: {exc}"[:500], transient


def _follow(
    session: requests.Session, url: str, headers: Mapping[str, str], deadline: Deadline, keep: bool
) -> tuple[int, str, bytes]:
    """GET ``url``, following redirects only within its origin (at most ``MAX_REDIRECTS``), so
    the configured headers never reach another host, port or scheme (requests, following by
    itself, strips only ``Authorization``). Returns (status, the other origin's URL a redirect
    pointed to or "", body)."""
    for _ in range(MAX_REDIRECTS + 1):
        timeout = max(MIN_REQUEST_SECONDS, deadline.left())
        with session.get(
            url, headers=headers, timeout=timeout, stream=True, allow_redirects=False
        ) as response:
            if not response.is_redirect:
                return response.status_code, "", _drain(response, deadline, keep)
            status, target = response.status_code, urljoin(url, response.headers["Location"])
        if not same_origin(url, target):
            return status, target, b""
        url = target
    raise requests.TooManyRedirects(f"more than {MAX_REDIRECTS} redirects")


def _drain(response: requests.Response, deadline: Deadline, keep: bool) -> bytes:
    """Read the body (all of it, up to the cap) before the deadline."""
    kept, total = bytearray(), 0
    for chunk in response.iter_content(CHUNK_BYTES):
        total += len(chunk)
        if keep:
            kept += chunk
        if deadline.left() < 0:
            raise BodyTimeout("body not received before the deadline")
        if total >= MAX_BODY_BYTES:
            break
    return bytes(kept)
