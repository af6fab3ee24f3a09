"""Service settings: one frozen object, built from ``CONSUMER_*`` variables and validated at start.

Nothing reads the environment at import time; ``Settings.from_env`` is called by the CLI and the
WSGI entry point, and tests build ``Settings(...)`` directly.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from consumer.errors import SettingsError
from consumer.schedule import Cron, Every, Schedule
from consumer.settings_parse import convert
from consumer.settings_rules import (
    Rule,
    bind_problem,
    database_url_problem,
    header_object_problem,
    named,
    range_rules,
    url_problem,
)

PREFIX = "CONSUMER_"
DEFAULT_DATABASE_URL = "sqlite:///consumer.db"
# Pub/Sub's message limit is 10 MB; base64 inflates it by 4/3 and the envelope adds a little.
DEFAULT_MAX_BODY_BYTES = 14 * 1024 * 1024
NO_SMTP_HOST = (
    "CONSUMER_SMTP_HOST is required outside local mode: without it the email job kind would "
    "write messages to the pod's own filesystem (CONSUMER_MAILDIR_PATH) and mark them done"
)


@dataclass(frozen=True, repr=False)
class Settings:
    """Every knob of the service. Field docs are the configuration reference (see README)."""

    database_url: str = DEFAULT_DATABASE_URL
    """SQLAlchemy URL: a SQLite file (embedded default) or ``postgresql+psycopg://...``."""
    local_mode: bool = False
    """Insecure local mode: no push authentication. Must be asked for explicitly."""
    push_audience: str = ""
    """OIDC audience the push subscription was configured with (never derived from the request)."""
    push_service_accounts: tuple[str, ...] = ()
    """Service-account emails allowed to sign push requests."""
    oidc_certs_url: str = "https://www.googleapis.com/oauth2/v1/certs"
    """Where Google's ``{kid: certificate PEM}`` signing certificates are fetched (and cached)."""
    oidc_clock_skew_seconds: int = 30
    """Tolerance on the token's ``exp`` and ``iat`` for clocks that disagree (0..300)."""
    push_token: str = field(default="", repr=False)
    """Legacy shared verification token (``?token=``), for setups without OIDC."""
    ack_deadline_seconds: int = 60
    """The push subscription's ack deadline; for push it is also the request timeout."""
    safety_margin_seconds: int = 10
    """Handlers must finish this long before the ack deadline."""
    max_attempts: int = 5
    """Inbox attempts before an event is recorded ``dead``."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """Larger push bodies get 413 before they are read (chunked ones are cut off at the limit)."""
    max_attributes: int = 256
    """Most message attributes accepted (Pub/Sub allows 100)."""
    max_json_depth: int = 64
    """Deepest JSON nesting accepted in a push body."""
    max_json_nodes: int = 200_000
    """Most JSON values (objects, arrays, strings, numbers...) in a push body or its data; bounds
    a worker's memory (4.9 million ``{}`` fit in 14 MiB)."""
    inbox_retention_seconds: int = 7 * 24 * 3600
    """``cleanup`` purges finished inbox rows older than this (their keys can then recur)."""
    tick_periods: Mapping[str, Schedule] = field(default_factory=dict)
    """Overrides of the registered tick schedules, comma-separated: ``task=seconds`` or
    ``task=cron:EXPRESSION[@TIME_ZONE]``, e.g. ``report=cron:0 9 * * 1-5@Europe/Madrid``."""
    tick_max_age_periods: int = 2
    """A tick older than this many of its task's latest slots (periods or cron fire times) is
    stale: recorded ``skipped``, so a backlog is coalesced."""
    tick_future_tolerance_seconds: int = 5
    """A tick whose slot begins more than this far after our clock is refused, nothing recorded."""
    plugins: tuple[str, ...] = ()
    """Modules with a ``register(registry)`` function that add user handlers."""
    bind: str = "127.0.0.1:8080"
    """``host:port`` gunicorn listens on (``0.0.0.0:8080`` inside a container)."""
    workers: int = 2
    """gunicorn worker processes (asyncio workers: each serves many connections)."""
    threads: int = 4
    """Requests one worker runs at once (its handler threads); more wait, already read whole."""
    header_timeout_seconds: int = 10
    """A new connection must send its request headers within this, or it is closed."""
    body_timeout_seconds: int = 10
    """A request body must arrive whole within this (408 otherwise); at most the handler budget."""
    local_tick_seconds: int = 0
    """In local mode, publish a ``sweep`` and ``cleanup`` tick this often (0: never)."""
    send_to: str = ""
    """URL ``consumer send`` posts to; empty: ``/push`` at ``bind`` on this host."""
    log_level: str = "INFO"
    """Level of the log lines on stderr."""
    log_format: str = "auto"
    """``json`` (one object per line, for Cloud Logging), ``text``, or ``auto``: text when stderr
    is a terminal, else JSON (the container image sets ``json``)."""
    project_id: str = ""
    """Google Cloud project of the traces named in log lines (``projects/ID/traces/...``)."""
    deploy_hook_secrets: tuple[str, ...] = field(default=(), repr=False)
    """HMAC secrets accepted on ``POST /hooks/deploy``, comma-separated (two during a rotation).
    Empty: the hook refuses every request."""
    deploy_hook_tolerance_seconds: int = 300
    """How far a hook's signed timestamp may be from our clock, either way (replay window)."""
    warm_targets: tuple[str, ...] = ()
    """URLs the built-in HTTP cache warmer requests once per release, comma-separated."""
    warm_sitemap_url: str = ""
    """A sitemap (or sitemap index) whose URLs the HTTP warmer requests too."""
    warm_concurrency: int = 8
    """HTTP warmer: requests in flight at once."""
    warm_timeout_ms: int = 5000
    """HTTP warmer: time limit of one request (also cut to the handler's remaining budget)."""
    warm_retries: int = 2
    """HTTP warmer: retries of a target after a timeout, connection error, 429 or 5xx."""
    warm_backoff_ms: int = 200
    """HTTP warmer: first retry delay; doubles per retry, with jitter."""
    warm_headers: str = field(default="", repr=False)
    """HTTP warmer: extra request headers as a JSON object, e.g. ``{"Authorization": "..."}``."""
    warm_max_targets: int = 10000
    """HTTP warmer: at most this many targets per run (a runaway sitemap is cut here)."""
    sweep_batch_size: int = 100
    """Jobs the sweep claims per statement; a sweeper killed mid-batch re-runs at most these."""
    job_lease_seconds: int = 10
    """Lease on a claimed job, renewed by the live sweeper every third of it: a killed sweeper's
    batch is retried after about this long."""
    job_max_attempts: int = 10
    """Attempts of a job enqueued without its own ``max_attempts`` before it is ``dead``."""
    job_retry_base_seconds: int = 10
    """First retry delay of a failed job; doubles per attempt, with jitter, up to the max."""
    job_retry_max_seconds: int = 3600
    job_retention_seconds: int = 7 * 24 * 3600
    """``cleanup`` purges finished jobs (freeing their idempotency keys) after this."""
    smtp_host: str = ""
    """SMTP server of the ``email`` job kind; required outside local mode (empty, in local mode:
    deliver to ``maildir_path`` instead)."""
    smtp_port: int = 0
    """0: 465 with ``ssl``, 587 with ``starttls``, 25 with ``none``."""
    smtp_security: str = "starttls"
    """``starttls``, ``ssl`` or ``none`` (plain SMTP, for a relay on a trusted network)."""
    smtp_username: str = ""
    smtp_password: str = field(default="", repr=False)
    smtp_timeout_seconds: int = 30
    mail_from: str = "consumer@localhost"
    """Default sender of the ``email`` job kind; its domain also names the Message-IDs."""
    maildir_path: str = "maildir"
    """Where the ``email`` kind delivers when no ``smtp_host`` is set (the embedded default)."""
    continuation_topic: str = ""
    """Pub/Sub topic (``projects/P/topics/T``, pushed to this service) on which a sweep that ran
    out of budget with work left publishes a continuation; empty: the next tick carries on."""
    continuation_fanout: int = 4
    """Most continuations one tick's sweep publishes, so several pods drain a backlog."""
    storage_rules: str = ""
    """File-processing rules: a JSON list, or the path of a JSON file (see docs/storage.md)."""
    dashboard_bind: str = "127.0.0.1:8081"
    """``host:port`` of ``consumer dashboard`` (its own listener, never the push port)."""
    dashboard_token: str = field(default="", repr=False)
    """Admin token of the dashboard (login form or ``Authorization: Bearer``); at least 16
    characters. Outside local mode the dashboard needs this or the IAP audience."""
    dashboard_iap_audience: str = ""
    """Accept Identity-Aware Proxy users: the ``/projects/NUMBER/global/backendServices/ID``
    audience of the signed ``x-goog-iap-jwt-assertion`` header."""
    dashboard_iap_keys_url: str = "https://www.gstatic.com/iap/verify/public_key-jwk"
    """Where IAP's ES256 public keys (a JWK set) are fetched (and cached)."""

    @property
    def handler_budget_seconds(self) -> float:
        """How long a handler may run: the ack deadline less the safety margin."""
        return float(self.ack_deadline_seconds - self.safety_margin_seconds)

    @property
    def lease_seconds(self) -> int:
        """Inbox lease: outlives gunicorn's timeout (= ack deadline) so a live worker keeps it."""
        return self.ack_deadline_seconds + self.safety_margin_seconds

    @property
    def gunicorn_timeout_seconds(self) -> int:
        return self.ack_deadline_seconds

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, serves_push: bool = True) -> Settings:
        """Build from ``CONSUMER_*`` variables; every problem is reported at once.
        ``serves_push=False`` (pull mode, CLI tools) has no endpoint to authenticate."""
        values: dict[str, Any] = {}
        problems: list[str] = []
        known = {f.name.upper(): f for f in dataclasses.fields(cls)}
        for key, raw in env.items():
            if not key.startswith(PREFIX):
                continue
            name = key[len(PREFIX) :]
            spec = known.get(name)
            if spec is None:
                problems.append(f"{key}: unknown setting")
                continue
            try:
                values[spec.name] = convert(spec, raw)
            except ValueError as exc:
                problems.append(f"{key}: {exc}")
        if problems:
            raise SettingsError("; ".join(sorted(problems)))
        settings = cls(**values)
        settings.validate(serves_push=serves_push)
        if serves_push:
            settings.require_mail_transport()
        return settings

    def require_mail_transport(self) -> None:
        """A process that runs handlers (and so the ``email`` job kind) outside local mode needs
        an SMTP host; the CLI's tools, which send no mail, do not."""
        if not (self.local_mode or self.smtp_host):
            raise SettingsError(NO_SMTP_HOST)

    def validate(self, *, serves_push: bool = True) -> None:
        """Refuse settings that would break the delivery promise or leave the endpoint open."""
        problems = [msg for ok, msg in self._rules(serves_push) if not ok]
        if problems:
            raise SettingsError("; ".join(problems))

    def _rules(self, serves_push: bool) -> list[Rule]:
        authenticated = bool(self.push_audience and self.push_service_accounts) or bool(
            self.push_token
        )
        return [
            (
                self.local_mode or authenticated or not serves_push,
                "push authentication is not configured: set CONSUMER_PUSH_AUDIENCE and "
                "CONSUMER_PUSH_SERVICE_ACCOUNTS (OIDC) or CONSUMER_PUSH_TOKEN, "
                "or CONSUMER_LOCAL_MODE=true for an insecure local run",
            ),
            (
                self.safety_margin_seconds < self.ack_deadline_seconds,
                "CONSUMER_SAFETY_MARGIN_SECONDS must be below the ack deadline",
            ),
            (
                self.job_retry_base_seconds <= self.job_retry_max_seconds,
                "CONSUMER_JOB_RETRY_BASE_SECONDS must be at most CONSUMER_JOB_RETRY_MAX_SECONDS",
            ),
            (
                all(isinstance(value, Every | Cron) for value in self.tick_periods.values()),
                "CONSUMER_TICK_PERIODS: every value must be seconds or cron:EXPRESSION",
            ),
            (
                self.log_format in ("auto", "json", "text"),
                "CONSUMER_LOG_FORMAT must be auto, json or text",
            ),
            named("database_url", database_url_problem(self.database_url)),
            named("bind", bind_problem(self.bind)),
            *range_rules(self),
            *_job_rules(self),
            *_deploy_rules(self),
            *_auth_rules(self),
            *_storage_rules(self),
            *_dashboard_rules(self),
        ]

    def __repr__(self) -> str:
        """Every field but the secrets; the database URL without its password."""
        shown = []
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            if spec.name in SECRET_FIELDS:
                value = "[redacted]" if value else value
            elif spec.name == "database_url":
                value = redacted_url(value)
            shown.append(f"{spec.name}={value!r}")
        return f"Settings({', '.join(shown)})"


SECRET_FIELDS = frozenset(
    {"push_token", "deploy_hook_secrets", "smtp_password", "warm_headers", "dashboard_token"}
)


def redacted_url(url: str) -> str:
    """A database URL with its password masked (unparseable: nothing of it is shown)."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # any parse failure: show nothing that might be a secret
        return "[unparseable]"


def _auth_rules(settings: Settings) -> list[Rule]:
    """Push authentication (consumer.oidc): no half-configured OIDC, no certs over plain HTTP."""
    return [
        (
            bool(settings.push_audience) == bool(settings.push_service_accounts),
            "CONSUMER_PUSH_AUDIENCE and CONSUMER_PUSH_SERVICE_ACCOUNTS must be set together",
        ),
        (
            not settings.push_token or len(settings.push_token) >= 16,
            "CONSUMER_PUSH_TOKEN must be at least 16 characters (a guessable token is no check)",
        ),
        named("oidc_certs_url", url_problem(settings.oidc_certs_url, loopback_http=True)),
    ]


def _job_rules(settings: Settings) -> list[Rule]:
    """The ``email`` job kind and the sweep's continuations (consumer.jobs); numbers are in
    ``settings_rules.RANGES``."""
    return [
        (
            settings.smtp_security in ("starttls", "ssl", "none"),
            "CONSUMER_SMTP_SECURITY must be starttls, ssl or none",
        ),
        (
            not settings.continuation_topic
            or bool(re.fullmatch(r"projects/[^/]+/topics/[^/]+", settings.continuation_topic)),
            "CONSUMER_CONTINUATION_TOPIC must be projects/PROJECT/topics/TOPIC",
        ),
    ]


def _deploy_rules(settings: Settings) -> list[Rule]:
    """The deploy hook and cache warmer settings (consumer.deploy)."""
    targets = [url_problem(url) for url in settings.warm_targets]
    sitemap = settings.warm_sitemap_url
    return [
        (
            all(len(secret) >= 16 for secret in settings.deploy_hook_secrets),
            "CONSUMER_DEPLOY_HOOK_SECRETS: every secret must be at least 16 characters",
        ),
        named("warm_targets", next((f"{p}" for p in targets if p), None)),
        named("warm_sitemap_url", url_problem(sitemap) if sitemap else None),
        (
            settings.smtp_security in ("starttls", "ssl", "none"),
            "CONSUMER_SMTP_SECURITY must be starttls, ssl or none",
        ),
        named("warm_headers", header_object_problem(settings.warm_headers)),
    ]


def _storage_rules(settings: Settings) -> list[Rule]:
    """Parsed at start, so a bad rule set stops the service instead of the first upload."""
    from consumer.storage.rules import problem_with

    problem = problem_with(settings.storage_rules)
    return [(not problem, f"CONSUMER_STORAGE_RULES: {problem}")]


IAP_AUDIENCE = re.compile(r"/projects/\d+/global/backendServices/\d+")


def _dashboard_rules(settings: Settings) -> list[tuple[bool, str]]:
    """The dashboard's authentication (consumer.dashboard.access); format checks only, since
    only ``consumer dashboard`` needs one of them configured."""
    keys_url = settings.dashboard_iap_keys_url
    audience = settings.dashboard_iap_audience
    return [
        (
            not settings.dashboard_token or len(settings.dashboard_token) >= 16,
            "CONSUMER_DASHBOARD_TOKEN must be at least 16 characters",
        ),
        (
            not audience or IAP_AUDIENCE.fullmatch(audience) is not None,
            "CONSUMER_DASHBOARD_IAP_AUDIENCE must be /projects/NUMBER/global/backendServices/ID",
        ),
        (
            keys_url.startswith(("https://", "http://127.0.0.1:", "http://localhost:")),
            "CONSUMER_DASHBOARD_IAP_KEYS_URL must be an https:// URL (plain http only on loopback)",
        ),
    ]
