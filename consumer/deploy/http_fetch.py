"""One GET with retries, backoff and a hard deadline: the unit of work of the HTTP warmer.

requests' timeout bounds each socket operation, not the whole response, so the body is read in
chunks against a deadline; a slow-dripping target cannot hold a worker past its time.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import requests

from consumer.deploy.report import TargetResult
from consumer.settings import Settings

CHUNK_BYTES = 64 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024
"""Reading stops here: the target has rendered the page by then, which is what warms it."""
MAX_BACKOFF_SECONDS = 10.0
MIN_REQUEST_SECONDS = 0.05
"""A request is not started with less budget than this."""
RESERVE_SECONDS = 0.5
"""Kept back from the handler's budget to record the run and finish the inbox row."""
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
        extra = json.loads(settings.warm_headers) if settings.warm_headers.strip() else {}
        return cls(
            timeout_seconds=settings.warm_timeout_ms / 1000,
            retries=settings.warm_retries,
            backoff_seconds=settings.warm_backoff_ms / 1000,
            concurrency=settings.warm_concurrency,
            max_targets=settings.warm_max_targets,
            headers={"User-Agent": USER_AGENT, **extra},
        )

    def delay(self, attempt: int) -> float:
        """Exponential backoff with jitter before retry number ``attempt``."""
        ceiling = min(MAX_BACKOFF_SECONDS, self.backoff_seconds * 2 ** (attempt - 1))
        return ceiling * random.uniform(0.5, 1.0)


@dataclass(frozen=True)
class Budget:
    """The handler's remaining time, less the reserve for recording the run."""

    remaining: Callable[[], float]

    def left(self) -> float:
        return self.remaining() - RESERVE_SECONDS

    def allows(self, seconds: float) -> bool:
        return self.left() >= seconds

    def timeout(self, wanted: float) -> float:
        return max(MIN_REQUEST_SECONDS, min(wanted, self.left()))


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
    deadline = time.monotonic() + timeout
    try:
        with session.get(url, headers=policy.headers, timeout=timeout, stream=True) as response:
            body = _drain(response, deadline, keep)
    except requests.Timeout as exc:
        return None, f"timed out after {timeout:.2f}s ({type(exc).__name__})", True, b""
    except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
        return None, f"{type(exc).__name__}: {exc}"[:500], True, b""
    except requests.RequestException as exc:
        return None, f"{type(exc).__name__}: {exc}"[:500], False, b""
    status = response.status_code
    if status >= 400:
        return status, f"HTTP {status}", status == 429 or status >= 500, b""
    return status, "", False, body


def _drain(response: requests.Response, deadline: float, keep: bool) -> bytes:
    """Read the body (all of it, up to the cap) before the deadline."""
    kept, total = bytearray(), 0
    for chunk in response.iter_content(CHUNK_BYTES):
        total += len(chunk)
        if keep:
            kept += chunk
        if time.monotonic() > deadline:
            raise BodyTimeout("body not received before the deadline")
        if total >= MAX_BODY_BYTES:
            break
    return bytes(kept)
