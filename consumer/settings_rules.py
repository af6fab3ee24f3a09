"""The rules a ``Settings`` must pass before anything starts, each naming its variable and reason.

Every number has a range (a value past it would overflow a date, a timer or a database column
later, far from its cause), and every URL is read with a real URL parser: a check made on the
string would let ``http://127.0.0.1:1@evil.example/certs`` pass as a loopback address.
"""

from __future__ import annotations

import ipaddress
import json
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, urlsplit

if TYPE_CHECKING:
    from consumer.settings import Settings

Rule = tuple[bool, str]
DAY = 24 * 3600
# Inclusive ranges of every whole-number setting; wider than any sane configuration.
RANGES: dict[str, tuple[int, int]] = {
    "oidc_clock_skew_seconds": (0, 300),
    "ack_deadline_seconds": (10, 600),  # Pub/Sub's own range
    "safety_margin_seconds": (1, 599),
    "max_attempts": (1, 1000),
    "max_body_bytes": (1024, 32 * 1024 * 1024),
    "max_attributes": (1, 10_000),
    "max_json_depth": (1, 512),
    "max_json_nodes": (16, 5_000_000),
    "inbox_retention_seconds": (60, 3650 * DAY),
    "tick_max_age_periods": (1, 1000),
    "workers": (1, 64),
    "threads": (1, 64),
    "header_timeout_seconds": (1, 300),
    "body_timeout_seconds": (1, 600),
    "local_tick_seconds": (0, DAY),
    "deploy_hook_tolerance_seconds": (1, DAY),
    "warm_concurrency": (1, 256),
    "warm_timeout_ms": (1, 600_000),
    "warm_retries": (0, 10),
    "warm_backoff_ms": (0, 600_000),
    "warm_max_targets": (1, 1_000_000),
    "sweep_batch_size": (1, 10_000),  # SQLite binds at most 32766 parameters
    "job_lease_seconds": (1, 3600),
    "continuation_fanout": (1, 100),
    "tick_future_tolerance_seconds": (0, 60),
    "job_max_attempts": (1, 1000),
    "job_retry_base_seconds": (0, 30 * DAY),
    "job_retry_max_seconds": (0, 30 * DAY),
    "job_retention_seconds": (60, 3650 * DAY),
    "smtp_port": (0, 65535),
    "smtp_timeout_seconds": (1, 600),
}
TICK_PERIOD_RANGE = (1, 366 * DAY)
LOOPBACK_NAMES = frozenset({"localhost"})


def variable(name: str) -> str:
    return f"CONSUMER_{name.upper()}"


def range_rules(settings: Settings) -> list[Rule]:
    """One rule per whole-number setting, and one per tick period."""
    rules = [
        (low <= getattr(settings, name) <= high, f"{variable(name)} must be {low}..{high}")
        for name, (low, high) in RANGES.items()
    ]
    low, high = TICK_PERIOD_RANGE
    for task, schedule in settings.tick_periods.items():
        period = getattr(schedule, "seconds", low)  # a cron schedule was checked when parsed
        rules.append(
            (low <= period <= high, f"CONSUMER_TICK_PERIODS: {task}'s period must be {low}..{high}")
        )
    return rules


def url_problem(url: str, *, loopback_http: bool = False) -> str | None:
    """Why ``url`` is not an acceptable http(s) URL, or None. ``loopback_http``: plain http only
    to a loopback host (a name or address, IPv6 literals included); otherwise https only."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError on a port that is not 0..65535
    except ValueError as exc:
        return f"not a URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "must be an http(s) URL with a host"
    if parts.username is not None or parts.password is not None:
        return "must not carry user:password@"
    if loopback_http and parts.scheme == "http" and not is_loopback(parts):
        return "must be https:// (plain http only to a loopback host)"
    return None


def is_loopback(parts: SplitResult) -> bool:
    host = parts.hostname or ""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_problem(bind: str) -> str | None:
    """``host:port`` (``[v6]:port`` for IPv6) with a port 1..65535."""
    try:
        parts = urlsplit(f"//{bind}")
        port = parts.port
    except ValueError as exc:
        return f"not host:port ({exc})"
    if not parts.hostname or port is None or not 1 <= port <= 65535:
        return "must be host:port with a port 1..65535"
    if parts.username is not None or parts.path or parts.query:
        return "must be host:port"
    return None


def database_url_problem(url: str) -> str | None:
    """A parseable sqlite or postgresql URL (the password is never quoted back)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
        parsed.port  # noqa: B018 -- parsed lazily
    except (ArgumentError, ValueError):
        return "is not a database URL"
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        return "must be a sqlite:// or postgresql:// URL"
    return None


def header_object_problem(raw: str) -> str | None:
    """A JSON object of string header values with valid names (values are never quoted back)."""
    if not raw.strip():
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return "is not JSON"
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        return "must be a JSON object of string header values"
    from consumer.headers import header_problem

    for name, text in value.items():
        problem = header_problem(name, text)
        if problem:
            return problem
    return None


def named(name: str, problem: str | None) -> Rule:
    return (problem is None, f"{variable(name)}: {problem}")
