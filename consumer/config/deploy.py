"""The deploy hook's and the built-in HTTP cache warmer's settings (docs/deploy-hooks.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from consumer.config.fields import Rule, Section, named, setting
from consumer.config.parse import names, whole
from consumer.config.rules import DAY, header_object_problem, url_problem


@dataclass(frozen=True, repr=False)
class DeployHookSettings(Section):
    """``POST /hooks/deploy``: who may announce a release."""

    prefix: ClassVar[str] = "DEPLOY_HOOK_"
    secrets: tuple[str, ...] = setting((), convert=names, secret=True)
    """HMAC secrets accepted on ``POST /hooks/deploy``, comma-separated (two during a rotation).
    Empty: the hook refuses every request."""
    tolerance_seconds: int = setting(300, convert=whole, within=(1, DAY))
    """How far a hook's signed timestamp may be from our clock, either way (replay window)."""

    def checks(self) -> list[Rule]:
        return [
            (
                all(len(secret) >= 16 for secret in self.secrets),
                "CONSUMER_DEPLOY_HOOK_SECRETS: every secret must be at least 16 characters",
            )
        ]


@dataclass(frozen=True, repr=False)
class WarmingSettings(Section):
    """The built-in HTTP cache warmer (``consumer.deploy.http_warmer``)."""

    prefix: ClassVar[str] = "WARM_"
    targets: tuple[str, ...] = setting((), convert=names)
    """URLs the built-in HTTP cache warmer requests once per release, comma-separated."""
    sitemap_url: str = setting("")
    """A sitemap (or sitemap index) whose URLs the HTTP warmer requests too."""
    concurrency: int = setting(8, convert=whole, within=(1, 256))
    """HTTP warmer: requests in flight at once."""
    timeout_ms: int = setting(5000, convert=whole, within=(1, 600_000))
    """HTTP warmer: time limit of one request (also cut to the handler's remaining budget)."""
    retries: int = setting(2, convert=whole, within=(0, 10))
    """HTTP warmer: retries of a target after a timeout, connection error, 429 or 5xx."""
    backoff_ms: int = setting(200, convert=whole, within=(0, 600_000))
    """HTTP warmer: first retry delay; doubles per retry, with jitter."""
    headers: str = setting("", secret=True)
    """HTTP warmer: extra request headers as a JSON object, e.g. ``{"Authorization": "..."}``."""
    max_targets: int = setting(10000, convert=whole, within=(1, 1_000_000))
    """HTTP warmer: at most this many targets per run (a runaway sitemap is cut here)."""

    def checks(self) -> list[Rule]:
        """Every URL parsed for real; the headers' values are never quoted back."""
        targets = [url_problem(url) for url in self.targets]
        sitemap = self.sitemap_url
        return [
            named("CONSUMER_WARM_TARGETS", next((p for p in targets if p), None)),
            named("CONSUMER_WARM_SITEMAP_URL", url_problem(sitemap) if sitemap else None),
            named("CONSUMER_WARM_HEADERS", header_object_problem(self.headers)),
        ]
