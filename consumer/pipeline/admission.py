"""A source starts only what it is for (docs/sources.md).

Each push or pull subscription is declared with the routes it may feed (``CONSUMER_SOURCES``);
``POST /ticks/<task>`` may start only ticks and the deploy hook only deploys; the operator's own
ways in (the CLI, replay) are trusted. A ``run_now`` or a continuation (a wake-up is one) is
honoured only when the service signed it (``consumer.wire.signed``), since only its own tooling
sets them. Local mode, and settings built in code that declare nothing, keep the permissive
routing of old, and say so once, at start (``announce``).

A refused delivery is recorded ``dead`` with its full message under a key of its own
(``refused:SUBSCRIPTION:MESSAGE_ID``), never under the key of the event it tried to start: a
forged tick must not take the genuine tick's slot. It is acknowledged: a redelivery cannot mend
it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from consumer.config.admission import AdmissionSettings
from consumer.config.settings import Settings
from consumer.inbox.store import Inbox, Status
from consumer.pipeline.decision_log import Source
from consumer.wire import signed
from consumer.wire.events import Event, Route, escape, privileged
from consumer.wire.message import PushMessage
from consumer.wire.outcomes import Kind, Outcome, in_progress

log = logging.getLogger("consumer.admission")
TRUSTED = frozenset({Source.CLI, Source.REPLAY, Source.NOTIFY, Source.REDRIVE})
"""The operator's own ways in (whatever they start, an operator asked for), the service's own
in-process sweep when a job's enqueue commits, and its re-drive of a row left running: such a
row exists only because its delivery was admitted (a refused one is recorded ``dead``), so it is
not judged again, whatever way in it came through (``/ticks`` names no subscription)."""
ENDPOINT_ROUTES = {Source.TICKS: frozenset({Route.TICK.value}), Source.HOOK: frozenset({"deploy"})}
"""The HTTP endpoints that are not ``/push``: each starts one route only."""
_announced = threading.Event()


@dataclass(frozen=True)
class Refusal:
    """Why a delivery may not start its event, and the key it is recorded under."""

    key: str
    reason: str


def refusal(settings: Settings, source: Source, event: Event) -> Refusal | None:
    """Why ``source`` may not start ``event``, or ``None`` when it may."""
    if source in TRUSTED:
        return None
    if permissive(settings):
        _announce(settings)
        return None
    rules = settings.admission
    reason = _route_reason(rules, source, event) or _signature_reason(rules, event)
    return Refusal(refused_key(event.message), reason) if reason else None


def permissive(settings: Settings) -> bool:
    """Local mode, or settings built in code that declare no source (from the environment a
    server outside local mode must declare them: ``Settings.require_admission``)."""
    return settings.local_mode or not settings.admission.declared


def refused_key(message: PushMessage) -> str:
    """The delivery's own key: its subscription and messageId, apart from every event's."""
    where = message.subscription or "unknown-subscription"
    return f"refused:{escape(where, ':')}:{message.message_id}"


def record(
    inbox: Inbox, event: Event, refused: Refusal, now: datetime, lease: timedelta
) -> Outcome:
    """Record the refusal ``dead`` with the full message (a copy delivered again finds it);
    acknowledged either way."""
    route = event.route.value
    claim = inbox.claim(refused.key, event.route, event.message, now, lease)
    if claim is None:
        holder = inbox.holder(refused.key)
        if holder is None or holder.status is Status.RUNNING:
            return in_progress(refused.key, route, True)
        return Outcome(Kind.DUPLICATE, refused.key, {"status": holder.status.value}, route=route)
    result = {"refused": route, "subscription": event.message.subscription}
    inbox.finish(claim, Status.DEAD, now, result, refused.reason)
    details = {**result, "attempt": claim.attempts, "error": refused.reason}
    return Outcome(Kind.DEAD, refused.key, details, route=route)


def _route_reason(rules: AdmissionSettings, source: Source, event: Event) -> str:
    message, route = event.message, event.route.value
    where = _where(source, message)
    allowed = ENDPOINT_ROUTES.get(source) or rules.routes_of(message.subscription)
    if allowed is None:
        return f"refused: {where} is not declared in CONSUMER_SOURCES, so it may start nothing"
    if route not in allowed:
        may = " or ".join(sorted(allowed)) or "nothing"
        return f"refused: {where} may start {may}, and this message is a {route}"
    return ""


def _signature_reason(rules: AdmissionSettings, event: Event) -> str:
    asked = privileged(event)
    if asked and not signed.is_signed(event.message, rules.signing_secrets):
        return (
            f"refused: a {asked} the service did not sign; only its own are honoured "
            "(CONSUMER_SIGNING_SECRETS)"
        )
    return ""


def _where(source: Source, message: PushMessage) -> str:
    if source in ENDPOINT_ROUTES:
        return f"the {source.value} endpoint"
    if message.subscription:
        return f"subscription {message.subscription!r}"
    return "a delivery that names no subscription"


PERMISSIVE = (
    "%s: routing is permissive: any source may start any route, and run_now and continuations "
    "are honoured unsigned; to restrict it, declare the routes each subscription may start in "
    "CONSUMER_SOURCES (SUBSCRIPTION=ROUTE+ROUTE,..., e.g. consumer-jobs-push=job) and the "
    "service's signing secrets in CONSUMER_SIGNING_SECRETS (docs/sources.md)"
)


def announce(settings: Settings) -> None:
    """At a server's start (``consumer.http.app.create_app``, the embedded extension, ``consumer
    pull``): one WARNING line when routing is permissive, once per process, never hidden by a
    quieter ``CONSUMER_LOG_LEVEL``. A way in that starts without it says so at its first
    delivery instead (``refusal``)."""
    if permissive(settings):
        _announce(settings)


def _announce(settings: Settings) -> None:
    if _announced.is_set():
        return
    _announced.set()
    why = "local mode" if settings.local_mode else "no CONSUMER_SOURCES declared"
    log.log(max(logging.WARNING, log.getEffectiveLevel()), PERMISSIVE, why)
