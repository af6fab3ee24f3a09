"""Which deliveries may start what (docs/sources.md): the routes each Pub/Sub subscription may
feed, the secrets the service signs its own messages with, and how far ahead a jobs-topic
producer may schedule a job.

``CONSUMER_SOURCES`` is a comma-separated list of ``SUBSCRIPTION=ROUTE+ROUTE...``, a
subscription named by its short name or its full path, e.g.
``consumer-ticks-push=tick,consumer-jobs-push=job,consumer-continuations-push=tick+storage``.
``(unnamed)`` stands for deliveries that name no subscription (unwrapped push without metadata,
a storage CloudEvent); the whole value ``none`` declares that no subscription may start anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from consumer.config.fields import Rule, Section, setting
from consumer.config.parse import names, whole
from consumer.config.rules import DAY
from consumer.wire.events import Route

UNNAMED = "(unnamed)"
"""The declaration of deliveries that name no subscription (no real subscription has this name:
Pub/Sub names start with a letter)."""
NOTHING = "none"
"""The whole value that declares that no subscription may start anything."""
ROUTES = frozenset(route.value for route in Route)
NO_SOURCES = (
    "CONSUMER_SOURCES is not set: declare the routes each push or pull subscription may start, "
    "e.g. CONSUMER_SOURCES=consumer-ticks-push=tick,consumer-jobs-push=job (docs/sources.md), "
    "or CONSUMER_LOCAL_MODE=true for an insecure local run"
)
NO_SIGNING_SECRET = (
    "CONSUMER_SIGNING_SECRETS is not set: the service signs the continuations and wake-ups it "
    "publishes (CONSUMER_CONTINUATION_TOPIC, CONSUMER_WAKE_TOPIC) and honours no unsigned one; "
    "set a secret of 16+ characters (docs/sources.md)"
)


def sources(raw: str) -> dict[str, frozenset[str]]:
    """``SUBSCRIPTION=ROUTE+ROUTE`` items; ``none``: declared, nothing allowed. A ValueError
    names the first fault."""
    if raw.strip() == NOTHING:
        return {NOTHING: frozenset()}
    declared: dict[str, frozenset[str]] = {}
    for item in names(raw):
        name, equals, routes = (part.strip() for part in item.rpartition("="))
        if not (equals and name):
            raise ValueError(f"{item!r} is not SUBSCRIPTION=ROUTE+ROUTE...")
        allowed = frozenset(route.strip() for route in routes.split("+") if route.strip())
        if unknown := sorted(allowed - ROUTES):
            known = ", ".join(sorted(ROUTES))
            raise ValueError(f"{name}: unknown route {unknown[0]!r} (routes: {known})")
        if name in declared:
            raise ValueError(f"{name} is declared twice")
        declared[name] = allowed
    return declared


@dataclass(frozen=True, repr=False)
class AdmissionSettings(Section):
    """What each way in may start (docs/sources.md)."""

    sources: Mapping[str, frozenset[str]] = setting(convert=sources, factory=dict)
    """The routes (``tick``, ``storage``, ``deploy``, ``job``, ``other``) each push or pull
    subscription may start: ``SUBSCRIPTION=ROUTE+ROUTE``, comma-separated, by short name or full
    path; ``(unnamed)``: deliveries naming none; ``none``: no subscription. Anything else is
    recorded ``dead`` and acknowledged. Required outside local mode."""
    signing_secrets: tuple[str, ...] = setting((), convert=names, secret=True)
    """HMAC secrets of the service's own messages, comma-separated: it signs its continuations
    and wake-ups with the first, and honours a ``run_now`` or a continuation only when signed by
    one of them (two during a rotation)."""
    producer_max_delay_seconds: int = setting(7 * DAY, convert=whole, within=(60, 3650 * DAY))
    """How far ahead a jobs-topic message may set ``job_run_at``; a later one is recorded
    ``dead`` (replayable), so no producer holds a lock key's queue for ever."""

    @property
    def declared(self) -> bool:
        return bool(self.sources)

    @property
    def signing_secret(self) -> str:
        """The secret the service signs with (empty: it signs nothing)."""
        return self.signing_secrets[0] if self.signing_secrets else ""

    def routes_of(self, subscription: str) -> frozenset[str] | None:
        """The routes ``subscription`` (a full path or a short name) may start; ``None`` when it
        is not declared."""
        if not subscription:
            return self.sources.get(UNNAMED)
        short = subscription.rsplit("/", 1)[-1]
        return self.sources.get(subscription, self.sources.get(short))

    def checks(self) -> list[Rule]:
        return [
            (
                all(len(secret) >= 16 for secret in self.signing_secrets),
                "CONSUMER_SIGNING_SECRETS: every secret must be at least 16 characters",
            )
        ]

    def deployment_problems(self, local_mode: bool, publishes: bool) -> list[str]:
        """What a deployed server (or pull) lacks outside local mode: declared sources, and a
        signing secret when it publishes continuations or wake-ups (``publishes``)."""
        if local_mode:
            return []
        problems = [] if self.declared else [NO_SOURCES]
        return problems + ([NO_SIGNING_SECRET] if publishes and not self.signing_secrets else [])
