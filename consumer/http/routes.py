"""The route table: every way into the HTTP service, one row each.

A row says which path and methods it answers, which delivery source it is (None for the probes
and documents), how a caller authenticates, how large a body it takes, and which handler answers
it. The front door (``consumer.http.gate``) matches a request against it once, on any serving
(the bridge, the plain WSGI app, the embedded extension); the gunicorn access-log filter and the
OpenAPI document are checked against it (``tests/http/test_routes.py``). A path no row matches is
a 404 and a method a row does not take a 405, both before any handler and any body.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property

from consumer.deploy.hook import HOOK_MAX_BYTES
from consumer.pipeline.decision_log import Source

SMALL_BODY_BYTES = HOOK_MAX_BYTES
"""A hook's or a tick's body is a few fields; a probe takes none. The push limit is the server's
``CONSUMER_MAX_BODY_BYTES``."""
SERVER_LIMIT = -1
"""``Route.max_body_bytes``: the server's body limit (a push's)."""
JOB_LIMIT = -2
"""``Route.max_body_bytes``: a job's payload limit (``CONSUMER_JOB_MAX_PAYLOAD_BYTES``) plus
``SMALL_BODY_BYTES`` for the request's other fields (``POST /jobs``)."""


class Auth(StrEnum):
    """How a row's caller proves who it is (checked by ``consumer.http.gate``)."""

    PUSH = "push"  # OIDC token from Pub/Sub, the legacy ?token=, or nothing in local mode
    HOOK = "hook"  # HMAC signature over the body (X-Consumer-Timestamp / X-Consumer-Signature)
    TICK = "tick"  # a Cloud Scheduler OIDC token, or the hook's HMAC scheme under tick secrets
    JOBS = "jobs"  # the job API's own OIDC audience and accounts, or HMAC under its own secrets
    NONE = "none"  # probes and documents: nothing to start
    # --- a job's HTTP target reporting on it (docs/long-running-jobs.md) ---
    JOB_REPORT = "job-report"  # the job's target: its HMAC signature, ID token, or claim alone


class Handler(StrEnum):
    """What answers a row: a delivery handler (``consumer.http.deliveries``) or a Flask view."""

    PUSH = "push"
    HOOK = "deploy_hook"
    TICK = "ticks"
    JOB_ENQUEUE = "job_enqueue"
    JOB = "job"  # GET reads it, DELETE cancels it
    JOB_RETRY = "job_retry"
    HEALTHZ = "healthz"
    READYZ = "readyz"
    METRICS = "metrics"
    OPENAPI = "openapi"
    JOB_HEARTBEAT = "job_heartbeat"
    JOB_COMPLETE = "job_complete"


@dataclass(frozen=True)
class Route:
    path: str
    """As OpenAPI writes it: ``{name}`` is one non-empty path segment."""
    methods: frozenset[str]
    source: Source | None
    auth: Auth
    max_body_bytes: int
    handler: Handler
    routine: bool = False
    """A probe or scrape: its access line is logged only when it fails."""

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        return _pattern(self.path)

    def limit(self, server_limit: int, job_payload_limit: int = 0) -> int:
        if self.max_body_bytes == SERVER_LIMIT:
            return server_limit
        if self.max_body_bytes == JOB_LIMIT:
            return job_payload_limit + SMALL_BODY_BYTES
        return self.max_body_bytes


POST, GET = frozenset({"POST"}), frozenset({"GET", "HEAD"})
PUSH = Route("/push", POST, Source.PUSH, Auth.PUSH, SERVER_LIMIT, Handler.PUSH)
HOOK = Route("/hooks/deploy", POST, Source.HOOK, Auth.HOOK, SMALL_BODY_BYTES, Handler.HOOK)
TICK = Route("/ticks/{task}", POST, Source.TICKS, Auth.TICK, SMALL_BODY_BYTES, Handler.TICK)
DELIVERIES = (PUSH, HOOK, TICK)
JOB_API = (
    Route("/jobs", POST, None, Auth.JOBS, JOB_LIMIT, Handler.JOB_ENQUEUE),
    Route("/jobs/{key}", frozenset({"GET", "DELETE"}), None, Auth.JOBS, SMALL_BODY_BYTES,
          Handler.JOB),
    Route("/jobs/{key}/retry", POST, None, Auth.JOBS, SMALL_BODY_BYTES, Handler.JOB_RETRY),
)  # fmt: skip
"""The job API (docs/job-api.md): answered by the front door (``consumer.http.jobs_api``)."""
JOB_HANDLERS = frozenset(route.handler for route in JOB_API)
PROBES = (
    Route("/healthz", GET, None, Auth.NONE, SMALL_BODY_BYTES, Handler.HEALTHZ, routine=True),
    Route("/readyz", GET, None, Auth.NONE, SMALL_BODY_BYTES, Handler.READYZ, routine=True),
    Route("/metrics", GET, None, Auth.NONE, SMALL_BODY_BYTES, Handler.METRICS, routine=True),
    Route("/openapi.yaml", GET, None, Auth.NONE, SMALL_BODY_BYTES, Handler.OPENAPI),
)
# --- a job's HTTP target reporting on it (docs/long-running-jobs.md) ---
REPORT_BODY_BYTES = 96 * 1024
"""A completion's result object may be up to 64 KiB (a target's answer's), with room around."""
JOB_REPORTS = (
    Route("/jobs/{id}/heartbeat", POST, None, Auth.JOB_REPORT, REPORT_BODY_BYTES,
          Handler.JOB_HEARTBEAT),
    Route("/jobs/{id}/complete", POST, None, Auth.JOB_REPORT, REPORT_BODY_BYTES,
          Handler.JOB_COMPLETE),
)  # fmt: skip
REPORT_HANDLERS = frozenset(route.handler for route in JOB_REPORTS)
# --- end of the job reports ---
TABLE = DELIVERIES + JOB_API + PROBES + JOB_REPORTS
"""Every row ``create_app`` serves."""


@dataclass(frozen=True)
class Match:
    route: Route
    params: Mapping[str, str]


def match(routes: Iterable[Route], path: str) -> Match | None:
    """The row ``path`` (exact, as the server decoded it) names, with its parameters; None when
    no row does: no trailing slash, double slash or case variant is any row's."""
    for route in routes:
        found = route.pattern.fullmatch(path)
        if found is not None:
            return Match(route, found.groupdict())
    return None


def delivery_rows(*, hook: bool = True, tick: bool = True, jobs: bool = True) -> tuple[Route, ...]:
    """The rows an app mounts (``consumer.http.embed``: the hook, ticks and job API optional; a
    job target's reports always, so a job served by a target can report wherever it is mounted)."""
    rows = tuple(r for r in DELIVERIES if (r is not HOOK or hook) and (r is not TICK or tick))
    return rows + (JOB_API if jobs else ()) + JOB_REPORTS


def access_patterns(routes: Iterable[Route] = TABLE) -> dict[str, list[str]]:
    """For the access-log filter (``consumer.observe.logs.SkipDecidedRequests``): the regular
    expressions of the paths whose requests are decisions, and of the routine ones."""
    return {
        "decided": [r.pattern.pattern for r in routes if r.source is not None],
        "routine": [r.pattern.pattern for r in routes if r.routine],
    }


def _pattern(path: str) -> re.Pattern[str]:
    parts = re.split(r"\{(\w+)\}", path)
    literal = [re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/]+)" for i, part in
               enumerate(parts)]  # fmt: skip
    return re.compile("".join(literal))
