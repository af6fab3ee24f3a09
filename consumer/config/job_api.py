"""Who may call the job API (``POST /jobs``, ``GET``/``DELETE /jobs/{key}``,
``POST /jobs/{key}/retry``; docs/job-api.md): services in any language, with an OIDC token of
their own service account, or the deploy hook's HMAC scheme under secrets of its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from consumer.config.callers import SignedCallers
from consumer.config.fields import Section, setting
from consumer.config.parse import names, whole
from consumer.config.rules import DAY


@dataclass(frozen=True, repr=False)
class JobApiSettings(SignedCallers, Section):
    """The job API's credentials are its own, not the push subscription's nor the ticks': a token
    minted for pushing or a tick secret must not enqueue or cancel jobs (least privilege). The
    certificates URL and the clock skew are the push ones (``CONSUMER_OIDC_*``). Outside local
    mode, with neither OIDC nor secrets configured, the API refuses every request (401)."""

    prefix: ClassVar[str] = "JOB_API_"
    audience: str = setting("")
    """OIDC audience the API's callers sign their ID tokens for (e.g. its base URL)."""
    service_accounts: tuple[str, ...] = setting((), convert=names)
    """Service-account emails allowed to call the job API with an OIDC token, comma-separated."""
    secrets: tuple[str, ...] = setting((), convert=names, secret=True)
    """HMAC secrets accepted by the job API, comma-separated (two during a rotation)."""
    tolerance_seconds: int = setting(300, convert=whole, within=(1, DAY))
    """How far a signed request's timestamp may be from our clock, either way."""
