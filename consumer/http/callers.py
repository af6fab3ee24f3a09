"""Who may use a way in whose callers show an OIDC ID token or sign with the deploy hook's HMAC
scheme (``consumer.config.callers``): ``/ticks`` (``consumer.http.ticks``) and the job API
(``/jobs``, docs/job-api.md). Decided by the front door (``consumer.http.gate``) before the body
is read, per request by what it carries:

- ``Authorization: Bearer <ID token>``: verified here, for the way in's own audience and one of
  its own service accounts;
- otherwise the HMAC scheme under the way in's own secrets: the headers are checked here, the
  signature by the handler once the body is in (``consumer.http.credentials``).
"""

from __future__ import annotations

from collections.abc import Mapping

from consumer.auth.certs import CachedCerts
from consumer.auth.oidc import OidcAuthenticator
from consumer.auth.signature import SIGNATURE_HEADER, TIMESTAMP, TIMESTAMP_HEADER, Verifier
from consumer.config.callers import SignedCallers
from consumer.config.settings import Settings
from consumer.errors import Unauthorized
from consumer.http.credentials import Credentials, Scheme

SIGNED_HEADERS = (TIMESTAMP_HEADER, SIGNATURE_HEADER)


class CallerGate:
    """One way in's check of a request, from its headers alone. ``what`` names the way in in
    every refusal (``"ticks"``, ``"the job API"``); ``disabled``: the refusal when nothing is
    configured; ``open_locally``: in local mode an unconfigured way in lets every caller in."""

    def __init__(
        self, callers: SignedCallers, oidc: OidcAuthenticator | None, what: str, disabled: str,
        *, open_locally: bool = False,
    ) -> None:  # fmt: skip
        self.callers, self.what, self.disabled = callers, what, disabled
        self.open_locally = open_locally
        self._oidc = oidc
        self._verifier = Verifier(callers.secrets, callers.tolerance_seconds)

    @classmethod
    def of(
        cls, callers: SignedCallers, settings: Settings, certs: CachedCerts | None, what: str,
        disabled: str, *, open_locally: bool = False,
    ) -> CallerGate:  # fmt: skip
        """``certs``: the push authenticator's cache when it has one (the same Google keys)."""
        oidc = None
        if callers.oidc:
            oidc = OidcAuthenticator(
                audience=callers.audience,
                accounts=callers.service_accounts,
                certs=certs or CachedCerts(settings.auth.oidc_certs_url),
                clock_skew_seconds=settings.auth.oidc_clock_skew_seconds,
            )
        return cls(callers, oidc, what, disabled, open_locally=open_locally and settings.local_mode)

    def check(self, headers: Mapping[str, str]) -> Credentials:
        """The caller's credentials; ``Unauthorized``/``Forbidden`` when the headers do not show
        an allowed caller. ``headers``: the request's one view, names lower-case."""
        if not self.callers.enabled:
            if self.open_locally:
                return Credentials(Scheme.LOCAL)
            raise Unauthorized(self.disabled)
        if not headers.get("authorization", "").strip():
            if not self.callers.secrets:
                raise Unauthorized(
                    f"missing Authorization header (signed requests to {self.what} are not enabled)"
                )
            signed = {name: headers.get(name.lower(), "").strip() for name in SIGNED_HEADERS}
            if not signed[SIGNATURE_HEADER]:
                raise Unauthorized(f"missing {SIGNATURE_HEADER} header")
            if not TIMESTAMP.fullmatch(signed[TIMESTAMP_HEADER]):
                raise Unauthorized("malformed timestamp: expected Unix seconds")
            return Credentials(Scheme.HMAC, verifier=self._verifier, signed=signed)
        if self._oidc is None:
            raise Unauthorized(f"OIDC tokens are not accepted by {self.what} here")
        return Credentials(Scheme.OIDC, self._oidc.identity(headers))
