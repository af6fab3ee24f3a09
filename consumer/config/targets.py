"""HTTP targets declared without Python (``CONSUMER_HTTP_TARGETS``) or by a plugin
(``registry.http_target``): what each serves, where it is called, and how it is authenticated.
Pure: parsing and checking only (``consumer.targets`` makes the calls).

``CONSUMER_HTTP_TARGETS`` is a JSON list (docs/http-targets.md)::

    [{"name": "orders", "url": "http://orders.internal/tasks/process-pending",
      "serves": {"tick": "process-pending", "period_seconds": 60},
      "auth": {"type": "none"}, "timeout_seconds": 30, "concurrency": 4}]

A ``job_kind`` target may also say ``"cap": 2`` and ``"rate": "50/1s"`` (docs/flow-control.md).

``serves`` names exactly one of: ``tick`` (a task name, with ``period_seconds`` or ``cron`` and
``timezone``), ``storage`` (a bucket, with an optional ``prefix``), ``deploy`` (a service),
``cloudevent`` (a CloudEvent type), ``message`` (``true``: every other message) or ``job_kind``.
``auth`` is stated explicitly: ``{"type": "none"}``, ``{"type": "google", "audience": ...}`` (an
ID token for the audience) or ``{"type": "hmac", "secrets": [...]}`` (the deploy hook's scheme).
The URL comes from here only, never from a message, and follows the warmer's URL rules.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from consumer.config.fields import Section, setting
from consumer.config.flow import NO_LIMIT, JobLimit, declared
from consumer.config.rules import url_problem
from consumer.wire.schedule import Cron, Every, Schedule, ScheduleError

SERVES = ("tick", "storage", "deploy", "cloudevent", "message", "job_kind")
AUTH_TYPES = ("none", "google", "hmac")
KEYS = {"name", "url", "serves", "auth", "timeout_seconds", "concurrency", "cap", "rate"}
SERVES_OPTIONS = {"tick": {"period_seconds", "cron", "timezone"}, "storage": {"prefix"}}
DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_CONCURRENCY = 4
MAX_TIMEOUT_SECONDS = 600.0
MAX_CONCURRENCY = 256
MIN_SECRET_CHARS = 16


@dataclass(frozen=True)
class Serves:
    """What a target serves: one ``what`` (of ``SERVES``) and its name (task, bucket, service,
    CloudEvent type, job kind; empty for ``message``)."""

    what: str
    name: str = ""
    schedule: Schedule | None = None
    """A tick task's schedule."""
    prefix: str = ""
    """A storage target's object-name prefix (empty: every object of the bucket)."""


@dataclass(frozen=True, repr=False)
class TargetAuth:
    type: str
    audience: str = ""
    secrets: tuple[str, ...] = ()
    report_accounts: tuple[str, ...] = ()
    """google: the service accounts whose ID tokens (for ``audience``) may report on a job the
    target answered 202 (docs/long-running-jobs.md); none: such a target cannot report."""

    def __repr__(self) -> str:
        return f"TargetAuth(type={self.type!r}, audience={self.audience!r})"


@dataclass(frozen=True)
class TargetSpec:
    """One HTTP target. ``concurrency`` is per process (each gunicorn worker has its own)."""

    name: str
    url: str
    serves: Serves
    auth: TargetAuth
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    concurrency: int = DEFAULT_CONCURRENCY
    limit: JobLimit = NO_LIMIT
    """A job-kind target's ``cap`` and ``rate``: across every pod (docs/flow-control.md)."""


def parse_targets(raw: str) -> tuple[TargetSpec, ...]:
    """The targets of ``CONSUMER_HTTP_TARGETS``; a ``ValueError`` names the first bad one."""
    if not raw.strip():
        return ()
    try:
        items = json.loads(raw)
    except ValueError:
        raise ValueError("is not JSON") from None
    if not isinstance(items, list):
        raise ValueError("must be a JSON list of targets")
    specs = tuple(target_from(item, f"target {i}") for i, item in enumerate(items))
    names = [spec.name for spec in specs]
    duplicate = next((name for name in names if names.count(name) > 1), None)
    if duplicate:
        raise ValueError(f"target {duplicate!r} is declared twice")
    return specs


def target_from(item: Any, where: str) -> TargetSpec:
    """One target from its JSON object (``where``: how to name it before its name is known)."""
    if not isinstance(item, dict):
        raise ValueError(f"{where}: must be a JSON object")
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f'{where}: needs a "name"')
    unknown = sorted(set(item) - KEYS)
    if unknown:
        raise ValueError(f"target {name!r}: unknown key(s) {', '.join(unknown)}")
    try:
        return target(
            name,
            url=item.get("url"),
            serves=item.get("serves"),
            auth=item.get("auth"),
            timeout_seconds=item.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS),
            concurrency=item.get("concurrency", DEFAULT_CONCURRENCY),
            cap=item.get("cap"),
            rate=item.get("rate"),
        )
    except ValueError as exc:
        raise ValueError(f"target {name!r}: {exc}") from None


def target(
    name: str,
    *,
    url: Any,
    serves: Any,
    auth: Any,
    timeout_seconds: Any = DEFAULT_TIMEOUT_SECONDS,
    concurrency: Any = DEFAULT_CONCURRENCY,
    cap: Any = None,
    rate: Any = None,
) -> TargetSpec:
    """A checked ``TargetSpec`` (settings and plugins declare targets through here)."""
    if not isinstance(url, str) or (problem := url_problem(url)):
        raise ValueError(f"url: {problem if isinstance(url, str) else 'must be a string'}")
    checked = _serves(serves)
    limit = declared(cap, rate)
    if limit.limited and checked.what != "job_kind":
        raise ValueError("cap and rate apply to a job_kind target only")
    return TargetSpec(
        name, url, checked, _auth(auth), _timeout(timeout_seconds), _limit(concurrency), limit
    )


def _serves(value: Any) -> Serves:
    if not isinstance(value, dict):
        raise ValueError(f"serves: must be an object naming one of {', '.join(SERVES)}")
    chosen = [what for what in SERVES if what in value]
    if len(chosen) != 1:
        raise ValueError(f"serves: name exactly one of {', '.join(SERVES)}")
    what = chosen[0]
    unknown = sorted(set(value) - {what} - SERVES_OPTIONS.get(what, set()))
    if unknown:
        raise ValueError(f"serves: unknown key(s) for {what}: {', '.join(unknown)}")
    if what == "message":
        if value["message"] is not True:
            raise ValueError('serves: "message" must be true')
        return Serves("message")
    name = value[what]
    if not isinstance(name, str) or not name:
        raise ValueError(f"serves: {what} must be a non-empty string")
    if what == "tick":
        return Serves(what, name, schedule=_schedule(value))
    prefix = value.get("prefix", "")
    if not isinstance(prefix, str):
        raise ValueError("serves: prefix must be a string")
    return Serves(what, name, prefix=prefix)


def _schedule(value: Mapping[str, Any]) -> Schedule:
    period, cron = value.get("period_seconds"), value.get("cron")
    if (period is None) == (cron is None):
        raise ValueError("serves: a tick needs period_seconds or cron, not both or neither")
    try:
        if period is not None:
            return Every(period)
        return Cron(str(cron), str(value.get("timezone", "UTC")))
    except ScheduleError as exc:
        raise ValueError(f"serves: {exc}") from None


def _auth(value: Any) -> TargetAuth:
    """Auth stated explicitly: a target without it is a mistake, not an open call."""
    if not isinstance(value, dict) or value.get("type") not in AUTH_TYPES:
        raise ValueError(f'auth: must be {{"type": one of {", ".join(AUTH_TYPES)}}}')
    kind = value["type"]
    allowed = {"none": {"type"}, "google": {"type", "audience", "report_accounts"},
               "hmac": {"type", "secrets"}}  # fmt: skip
    if set(value) - allowed[kind]:
        raise ValueError(f"auth: unknown key(s) for {kind}")
    if kind == "google":
        audience = value.get("audience")
        if not isinstance(audience, str) or not audience:
            raise ValueError("auth: google needs an audience")
        accounts = value.get("report_accounts", [])
        if not isinstance(accounts, list) or not all(isinstance(a, str) and a for a in accounts):
            raise ValueError("auth: report_accounts must be a list of service-account emails")
        return TargetAuth(kind, audience=audience, report_accounts=tuple(accounts))
    if kind == "hmac":
        secrets = value.get("secrets")
        if (
            not isinstance(secrets, list)
            or not secrets
            or not all(isinstance(s, str) and len(s) >= MIN_SECRET_CHARS for s in secrets)
        ):
            raise ValueError(f"auth: hmac needs secrets of {MIN_SECRET_CHARS}+ characters")
        return TargetAuth(kind, secrets=tuple(secrets))
    return TargetAuth(kind)


def _timeout(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("timeout_seconds must be a number")
    if not 0 < value <= MAX_TIMEOUT_SECONDS:
        raise ValueError(f"timeout_seconds must be in (0, {MAX_TIMEOUT_SECONDS:g}]")
    return float(value)


def _limit(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("concurrency must be a whole number")
    if not 1 <= value <= MAX_CONCURRENCY:
        raise ValueError(f"concurrency must be 1..{MAX_CONCURRENCY}")
    return value


@dataclass(frozen=True, repr=False)
class TargetSettings(Section):
    """HTTP targets (``consumer.targets``, docs/http-targets.md)."""

    prefix: ClassVar[str] = "HTTP_"
    targets: tuple[TargetSpec, ...] = setting((), convert=parse_targets, secret=True)
    """HTTP targets as a JSON list: each a name, a URL, what it serves (a tick task, a storage
    bucket/prefix, a deploy service, a CloudEvent type, other messages or a job kind), its auth
    (none, google ID token, hmac), a timeout and a per-process concurrency limit."""
