"""The front door's check of a job target's report (``POST /jobs/{id}/heartbeat`` and
``/complete``, docs/long-running-jobs.md): which target may report on the job the path names,
decided once, before the body is read.

The target proves itself as the consumer proved itself to it: an HMAC target signs its report
with the same secrets and scheme (``consumer.auth.signature``; the signature over the body is
checked by the handler, ``consumer.http.job_reports``, with the verifier decided here); a
Google-authenticated target sends a Google ID token for its own ``audience`` from one of its
declared ``report_accounts``; a target declared ``none`` is trusted on its claim token alone,
as its call was unauthenticated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import Engine

from consumer.auth.certs import CachedCerts
from consumer.auth.oidc import OidcAuthenticator
from consumer.auth.signature import SIGNATURE_HEADER, TIMESTAMP, TIMESTAMP_HEADER, Verifier
from consumer.config.settings import Settings
from consumer.config.targets import TargetSpec
from consumer.errors import Unauthorized
from consumer.http.credentials import NOBODY, Credentials, Scheme
from consumer.jobs.reports import JobReports, NoSuchJob, job_id_of

SIGNED = (TIMESTAMP_HEADER, SIGNATURE_HEADER)


class ReportGate:
    """The door's check of a report: which target may report on the job its path names."""

    def __init__(
        self, engine: Engine, specs: Iterable[TargetSpec], tolerance: int, certs: CachedCerts
    ) -> None:
        self.reports = JobReports(engine)
        self.targets = {s.serves.name: s for s in specs if s.serves.what == "job_kind"}
        self.tolerance = tolerance
        self._oidc = {  # one per target: each keeps its verified tokens
            kind: OidcAuthenticator(spec.auth.audience, spec.auth.report_accounts, certs)
            for kind, spec in self.targets.items() if spec.auth.report_accounts
        }  # fmt: skip

    def check(self, params: Mapping[str, str], headers: Mapping[str, str]) -> Credentials:
        """The reporter's credentials (an HMAC signature is checked over the body later).
        ``NoSuchJob`` (404) for an unknown job or one no HTTP target serves, ``Unauthorized``
        for a caller that is not its target."""
        job_id = job_id_of(params["id"])
        kind = self.reports.kind_of(job_id)
        spec = self.targets.get(kind)
        if spec is None:
            raise NoSuchJob(f"job {job_id} is of kind {kind!r}, which no HTTP target serves")
        auth = spec.auth
        if auth.type == "hmac":
            signed = {name: headers.get(name.lower(), "").strip() for name in SIGNED}
            if not signed[SIGNATURE_HEADER] or not TIMESTAMP.fullmatch(signed[TIMESTAMP_HEADER]):
                raise Unauthorized(f"a report on job {job_id} must be signed by its target")
            verifier = Verifier(auth.secrets, self.tolerance)
            return Credentials(Scheme.HMAC, verifier=verifier, signed=signed)
        if auth.type == "google":
            oidc = self._oidc.get(kind)
            if oidc is None:
                raise Unauthorized(f"target {spec.name!r} declares no report_accounts")
            return Credentials(Scheme.OIDC, oidc.identity(headers))
        return NOBODY  # an unauthenticated target: its claim token is its only proof


def report_gate(settings: Settings, engine: Engine, specs: Iterable[TargetSpec]) -> ReportGate:
    tolerance = settings.deploy_hook.tolerance_seconds
    return ReportGate(engine, specs, tolerance, CachedCerts(settings.auth.oidc_certs_url))
