"""Checks the settings sections share, each saying why a value is refused.

Every number has a range, declared on its field (a value past it would overflow a date, a timer
or a database column later, far from its cause), and every URL is read with a real URL parser: a
check made on the string would let ``http://127.0.0.1:1@evil.example/certs`` pass as a loopback
address.
"""

from __future__ import annotations

import ipaddress
import json
from urllib.parse import SplitResult, urlsplit

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from consumer.wire.headers import checked_headers

DAY = 24 * 3600
LOOPBACK_NAMES = frozenset({"localhost"})


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
    try:
        parsed = make_url(url)
        parsed.port  # noqa: B018 -- parsed lazily
    except (ArgumentError, ValueError):
        return "is not a database URL"
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        return "must be a sqlite:// or postgresql:// URL"
    return None


def header_object_problem(raw: str) -> str | None:
    """A JSON object of string header values with valid names (values are never quoted back);
    the names and values are judged by ``checked_headers``, as a job's email headers are."""
    if not raw.strip():
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return "is not JSON"
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        return "must be a JSON object of string header values"  # (JSON keys are strings)
    try:
        checked_headers(value)
    except ValueError as exc:
        return str(exc)
    return None
