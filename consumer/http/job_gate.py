"""Who may call the job API (``POST /jobs``, ``GET``/``DELETE /jobs/{key}``,
``POST /jobs/{key}/retry``; docs/job-api.md), decided by the front door before the body is read
(``consumer.http.gate``). Two ways in, chosen per request by what it carries, as for ticks
(``consumer.http.ticks``):

- ``Authorization: Bearer <ID token>``: verified here, for ``CONSUMER_JOB_API_AUDIENCE`` and one
  of ``CONSUMER_JOB_API_SERVICE_ACCOUNTS`` (a service's own account on Cloud Run or GKE);
- otherwise the deploy hook's HMAC scheme under ``CONSUMER_JOB_API_SECRETS``: the headers are
  checked here, the signature by the handler once the body is in, over the request's method and
  path and its body (``consumer.auth.signature.request_message``).

Local mode with none of these configured lets every caller in, as it does pushes; outside it the
API then refuses every request (401), as ``/ticks`` does unconfigured.
"""

from __future__ import annotations

from collections.abc import Mapping

from consumer.auth.certs import CachedCerts
from consumer.auth.oidc import OidcAuthenticator
from consumer.auth.signature import SIGNATURE_HEADER, TIMESTAMP, TIMESTAMP_HEADER, Verifier
from consumer.config.job_api import JobApiSettings
from consumer.config.settings import Settings
from consumer.errors import Unauthorized
from consumer.http.credentials import Credentials, Scheme

SIGNED_HEADERS = (TIMESTAMP_HEADER, SIGNATURE_HEADER)
DISABLED = (
    "job API is disabled: no credentials are configured (CONSUMER_JOB_API_SECRETS, or "
    "CONSUMER_JOB_API_AUDIENCE and CONSUMER_JOB_API_SERVICE_ACCOUNTS)"
)


class JobApiGate:
    """The front door's check of a job API request, from its headers alone."""

    def __init__(
        self, settings: JobApiSettings, local: bool, oidc: OidcAuthenticator | None
    ) -> None:
        self.settings, self.local = settings, local
        self._oidc = oidc
        self._verifier = Verifier(settings.secrets, settings.tolerance_seconds)

    @classmethod
    def of(cls, settings: Settings, certs: CachedCerts | None = None) -> JobApiGate:
        """``certs``: the push authenticator's cache when it has one (the same Google keys)."""
        api = settings.job_api
        if not api.oidc:
            return cls(api, settings.local_mode, None)
        oidc = OidcAuthenticator(
            audience=api.audience,
            accounts=api.service_accounts,
            certs=certs or CachedCerts(settings.auth.oidc_certs_url),
            clock_skew_seconds=settings.auth.oidc_clock_skew_seconds,
        )
        return cls(api, settings.local_mode, oidc)

    def check(self, headers: Mapping[str, str]) -> Credentials:
        """The caller's credentials; ``Unauthorized``/``Forbidden`` when the headers do not show
        an allowed caller. ``headers``: the request's one view, names lower-case."""
        if not self.settings.enabled:
            if self.local:
                return Credentials(Scheme.LOCAL)
            raise Unauthorized(DISABLED)
        if not headers.get("authorization", "").strip():
            if not self.settings.secrets:
                raise Unauthorized("missing Authorization header (signed requests are not enabled)")
            signed = {name: headers.get(name.lower(), "").strip() for name in SIGNED_HEADERS}
            if not signed[SIGNATURE_HEADER]:
                raise Unauthorized(f"missing {SIGNATURE_HEADER} header")
            if not TIMESTAMP.fullmatch(signed[TIMESTAMP_HEADER]):
                raise Unauthorized("malformed timestamp: expected Unix seconds")
            return Credentials(Scheme.HMAC, verifier=self._verifier, signed=signed)
        if self._oidc is None:
            raise Unauthorized("OIDC tokens are not accepted by the job API here")
        return Credentials(Scheme.OIDC, self._oidc.identity(headers))
