"""The core's settings sections: the server, push authentication, the inbox, ticks and logging.
Features own theirs (``consumer.config.jobs``, ``consumer.config.storage``...); ``Settings``
composes them all."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from consumer.config.fields import Rule, Section, named, setting
from consumer.config.parse import names, periods, whole
from consumer.config.rules import DAY, bind_problem, url_problem
from consumer.wire.schedule import Cron, Every, Schedule

# Pub/Sub's message limit is 10 MB; base64 inflates it by 4/3 and the envelope adds a little.
DEFAULT_MAX_BODY_BYTES = 14 * 1024 * 1024
TICK_PERIOD_RANGE = (1, 366 * DAY)
__all__ = ["AuthSettings", "InboxSettings", "LoggingSettings", "ServerSettings", "TickSettings"]


@dataclass(frozen=True, repr=False)
class ServerSettings(Section):
    """gunicorn and the request bridge in front of the app."""

    bind: str = setting("127.0.0.1:8080")
    """``host:port`` gunicorn listens on (``0.0.0.0:8080`` inside a container)."""
    workers: int = setting(2, convert=whole, within=(1, 64))
    """gunicorn worker processes (asyncio workers: each serves many connections)."""
    threads: int = setting(4, convert=whole, within=(1, 64))
    """Requests one worker runs at once (its handler threads); more wait, already read whole."""
    header_timeout_seconds: int = setting(10, convert=whole, within=(1, 300))
    """A new connection must send its request headers within this, or it is closed."""
    body_timeout_seconds: int = setting(10, convert=whole, within=(1, 600))
    """A request body must arrive whole within this (408 otherwise); at most the handler budget."""
    max_body_bytes: int = setting(
        DEFAULT_MAX_BODY_BYTES, convert=whole, within=(1024, 32 * 1024 * 1024)
    )
    """Larger push bodies get 413 before they are read (chunked ones are cut off at the limit)."""
    local_tick_seconds: int = setting(0, convert=whole, within=(0, DAY))
    """In local mode, publish a ``sweep`` and ``cleanup`` tick this often (0: never)."""
    send_to: str = setting("")
    """URL ``consumer send`` posts to; empty: ``/push`` at ``bind`` on this host."""

    def checks(self) -> list[Rule]:
        return [named("CONSUMER_BIND", bind_problem(self.bind))]


@dataclass(frozen=True, repr=False)
class AuthSettings(Section):
    """Push authentication (``consumer.auth.oidc``, ``consumer.auth.push``)."""

    push_audience: str = setting("")
    """OIDC audience the push subscription was configured with (never derived from the request)."""
    push_service_accounts: tuple[str, ...] = setting((), convert=names)
    """Service-account emails allowed to sign push requests."""
    oidc_certs_url: str = setting("https://www.googleapis.com/oauth2/v1/certs")
    """Where Google's ``{kid: certificate PEM}`` signing certificates are fetched (and cached)."""
    oidc_clock_skew_seconds: int = setting(30, convert=whole, within=(0, 300))
    """Tolerance on the token's ``exp`` and ``iat`` for clocks that disagree (0..300)."""
    push_token: str = setting("", secret=True)
    """Legacy shared verification token (``?token=``), for setups without OIDC."""

    @property
    def configured(self) -> bool:
        return bool(self.push_audience and self.push_service_accounts) or bool(self.push_token)

    def checks(self) -> list[Rule]:
        """No half-configured OIDC, no guessable token, no certificates over plain HTTP."""
        return [
            (
                bool(self.push_audience) == bool(self.push_service_accounts),
                "CONSUMER_PUSH_AUDIENCE and CONSUMER_PUSH_SERVICE_ACCOUNTS must be set together",
            ),
            (
                not self.push_token or len(self.push_token) >= 16,
                "CONSUMER_PUSH_TOKEN must be at least 16 characters "
                "(a guessable token is no check)",
            ),
            named("CONSUMER_OIDC_CERTS_URL", url_problem(self.oidc_certs_url, loopback_http=True)),
        ]


@dataclass(frozen=True, repr=False)
class InboxSettings(Section):
    """Delivery: the ack deadline and its budget, attempts, what a push may carry, retention."""

    ack_deadline_seconds: int = setting(60, convert=whole, within=(10, 600))  # Pub/Sub's range
    """The push subscription's ack deadline; for push it is also the request timeout."""
    safety_margin_seconds: int = setting(10, convert=whole, within=(1, 599))
    """Handlers must finish this long before the ack deadline."""
    lease_seconds: int = setting(4, convert=whole, within=(2, 600), env="INBOX_LEASE_SECONDS")
    """Lease on an inbox claim, renewed every second while its handler runs: a killed pod's
    deliveries are taken over by their redelivery after about this long."""
    max_attempts: int = setting(5, convert=whole, within=(1, 1000))
    """Inbox attempts before an event is recorded ``dead``."""
    max_attributes: int = setting(256, convert=whole, within=(1, 10_000))
    """Most message attributes accepted (Pub/Sub allows 100)."""
    max_json_depth: int = setting(64, convert=whole, within=(1, 512))
    """Deepest JSON nesting accepted in a push body."""
    max_json_nodes: int = setting(200_000, convert=whole, within=(16, 5_000_000))
    """Most JSON values (objects, arrays, strings, numbers...) in a push body or its data; bounds
    a worker's memory (4.9 million ``{}`` fit in 14 MiB)."""
    retention_seconds: int = setting(
        7 * DAY, convert=whole, within=(60, 3650 * DAY), env="INBOX_RETENTION_SECONDS"
    )
    """``cleanup`` purges finished inbox rows older than this (their keys can then recur)."""
    redrive_after_seconds: int = setting(
        0, convert=whole, within=(0, 30 * DAY), env="INBOX_REDRIVE_AFTER_SECONDS"
    )
    """A ``running`` row whose lease ran out this long ago, and that no redelivery took over, is
    run again by the sweep from its stored message; 0: two ack deadlines."""

    @property
    def redrive_after(self) -> int:
        """``redrive_after_seconds``, its default resolved."""
        return self.redrive_after_seconds or 2 * self.ack_deadline_seconds

    def checks(self) -> list[Rule]:
        return [
            (
                self.safety_margin_seconds < self.ack_deadline_seconds,
                "CONSUMER_SAFETY_MARGIN_SECONDS must be below the ack deadline",
            ),
            (
                self.redrive_after >= self.ack_deadline_seconds,
                "CONSUMER_INBOX_REDRIVE_AFTER_SECONDS must be 0 or at least the ack deadline "
                "(a redelivery comes first)",
            ),
        ]


@dataclass(frozen=True, repr=False)
class TickSettings(Section):
    """Tick schedules and which ticks are too old or too new (docs/ticks.md)."""

    prefix: ClassVar[str] = "TICK_"
    periods: Mapping[str, Schedule] = setting(convert=periods, factory=dict)
    """Overrides of the registered tick schedules, comma-separated: ``task=seconds`` or
    ``task=cron:EXPRESSION[@TIME_ZONE]``, e.g. ``report=cron:0 9 * * 1-5@Europe/Madrid``."""
    max_age_periods: int = setting(2, convert=whole, within=(1, 1000))
    """A tick older than this many of its task's latest slots (periods or cron fire times) is
    stale: recorded ``skipped``, so a backlog is coalesced."""
    future_tolerance_seconds: int = setting(5, convert=whole, within=(0, 60))
    """A tick whose slot begins more than this far after our clock is refused, nothing recorded."""

    def checks(self) -> list[Rule]:
        """A cron schedule was checked when parsed; a period has a range."""
        low, high = TICK_PERIOD_RANGE
        rules = [
            (
                all(isinstance(value, Every | Cron) for value in self.periods.values()),
                "CONSUMER_TICK_PERIODS: every value must be seconds or cron:EXPRESSION",
            )
        ]
        for task, schedule in self.periods.items():
            period = getattr(schedule, "seconds", low)
            message = f"CONSUMER_TICK_PERIODS: {task}'s period must be {low}..{high}"
            rules.append((low <= period <= high, message))
        return rules


@dataclass(frozen=True, repr=False)
class LoggingSettings(Section):
    """Log lines on stderr (``consumer.observe.logs``)."""

    prefix: ClassVar[str] = "LOG_"
    level: str = setting("INFO")
    """Level of the log lines on stderr."""
    format: str = setting("auto")
    """``json`` (one object per line, for Cloud Logging), ``text``, or ``auto``: text when stderr
    is a terminal, else JSON (the container image sets ``json``)."""
    project_id: str = setting("", env="PROJECT_ID")
    """Google Cloud project of the traces named in log lines (``projects/ID/traces/...``)."""

    def checks(self) -> list[Rule]:
        return [
            (
                self.format in ("auto", "json", "text"),
                "CONSUMER_LOG_FORMAT must be auto, json or text",
            )
        ]
