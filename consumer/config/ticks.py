"""Who may send ``POST /ticks/<task>`` (docs/ticks.md): Cloud Scheduler's HTTP targets with an
OIDC token, or any scheduler that can sign a request with the deploy hook's HMAC scheme; and the
tick tasks' overlap and catch-up policies set in the settings (docs/flow-control.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from consumer.config.callers import SignedCallers
from consumer.config.fields import Section, setting
from consumer.config.parse import names, whole
from consumer.config.rules import DAY
from consumer.wire.schedule import parse_policies


@dataclass(frozen=True, repr=False)
class TickHookSettings(SignedCallers, Section):
    """The plain HTTP tick endpoint. Its OIDC audience and accounts are its own, not the push
    subscription's: a Cloud Scheduler job signs for its target URL as its own service account,
    and a token minted for pushing must not start ticks (least privilege). The certificates URL
    and the clock skew are the push ones (``CONSUMER_OIDC_*``): the same Google keys sign both.
    With neither OIDC nor secrets configured the endpoint refuses every request (401)."""

    prefix: ClassVar[str] = "TICK_HOOK_"
    audience: str = setting("")
    """OIDC audience Cloud Scheduler's HTTP targets sign for (``oidc_token.audience``)."""
    service_accounts: tuple[str, ...] = setting((), convert=names)
    """Service-account emails allowed to send ticks with an OIDC token, comma-separated."""
    secrets: tuple[str, ...] = setting((), convert=names, secret=True)
    """HMAC secrets accepted on ``POST /ticks/<task>``, comma-separated (two during a rotation)."""
    tolerance_seconds: int = setting(300, convert=whole, within=(1, DAY))
    """How far a signed tick's timestamp (its slot clock) may be from our clock, either way."""


@dataclass(frozen=True, repr=False)
class TickControlSettings(Section):
    """Overrides of the overlap, catch-up and jitter policies tick tasks declare
    (``registry.tick(..., overlap=, catch_up=, jitter=)``): an operator changes them without a
    release."""

    prefix: ClassVar[str] = "TICK_"
    policies: Mapping[str, Mapping[str, str]] = setting(convert=parse_policies, factory=dict)
    """Per task, comma-separated: ``TASK.overlap=allow|skip|wait``,
    ``TASK.catch_up=latest|once|all:N`` and ``TASK.jitter=30s`` (a slot's run starts at an offset
    inside the window), e.g. ``report.overlap=skip,report.catch_up=all:5``."""
