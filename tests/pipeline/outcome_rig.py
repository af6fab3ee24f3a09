"""The rig of the outcome-table test (``test_outcome_table.py``): a dispatcher on the test's
database, the deliveries that make each situation of the table, and what each one gave."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.errors import (
    BodyTimeout,
    BodyTooLarge,
    ConsumerError,
    Forbidden,
    Incomplete,
    Permanent,
    Retryable,
    Skip,
    Unauthorized,
    Unavailable,
)
from consumer.inbox.model import InboxRow, Status
from consumer.inbox.store import Inbox
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.decision_log import Source
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.registry import Registry
from consumer.ticks import policy as ticks
from consumer.wire.envelope import Limits, parse_push, parse_wrapped
from consumer.wire.envelopes_out import deploy_body, tick_body, wrapped_body
from consumer.wire.message import Format, PushMessage
from consumer.wire.outcomes import Outcome
from tests.conftest import Clock

NOW = datetime(2026, 11, 29, 12, 0, 1, tzinfo=UTC)
SUBSCRIPTIONS = "projects/p/subscriptions/"
SOURCES = {"deploys-push": frozenset({"deploy"}), "ticks-push": frozenset({"tick"})}
SECRET = "signing-secret-0123456789"
MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class Seen:
    """What one delivery gave: its HTTP status, its outcome and the inbox row it left."""

    status: int
    outcome: str
    inbox: str


class Rig:
    """A dispatcher on the test's database whose deploy handler does what the message's ``act``
    attribute says, and whose tick task ``beat`` runs every minute."""

    def __init__(self, engine: Engine, clock: Clock, settings: Settings) -> None:
        self.engine, self.clock, self.inbox = engine, clock, Inbox(engine)
        self.settings = settings.with_values(max_attempts=MAX_ATTEMPTS)
        self.lease = timedelta(seconds=self.settings.lease_seconds)
        self.dispatcher = self.built(self.settings, engine)

    def built(self, settings: Settings, engine: Engine) -> Dispatcher:
        registry = Registry()
        ticks.register(registry)  # the tick rules, as the built-ins install them
        registry.deploy(self.act)
        registry.tick("beat", period_seconds=60)(lambda context, event: {"beat": True})
        return Dispatcher(settings, engine, registry, self.clock)

    def act(self, context: HandlerContext, event: Any) -> dict[str, Any]:
        act = event.message.attributes.get("act", "")
        if act in RAISED:
            raise RAISED[act]()
        if act.startswith("taken-by-"):
            self.take_over(event, act.removeprefix("taken-by-"))
        return {"handled": context.key}

    def take_over(self, event: Any, by: str) -> None:
        """Another delivery claims the key once this one's lease lapsed: a copy of the same
        message, another message, or another message that then finished the row."""
        self.clock.advance(self.lease.total_seconds() + 1)
        owner = event.message if by == "copy" else replace(event.message, message_id="owner")
        claim = self.inbox.claim(event.key, event.route, owner, self.clock(), self.lease)
        assert claim is not None
        if by == "finished":
            assert self.inbox.finish(claim, Status.DONE, self.clock())

    def seen(self, outcome: Outcome, inbox: str = "") -> Seen:
        row = self.inbox.get(outcome.key) if outcome.key else None
        return Seen(outcome.http_status, outcome.kind.value, inbox or described(row))

    def push(self, message: PushMessage) -> Seen:
        return self.seen(self.dispatcher.dispatch(message))

    def again(self, message: PushMessage) -> Seen:
        """``message`` delivered once more: ``unchanged`` when its row did not move."""
        before = self.inbox.get(self.key(message))
        outcome = self.dispatcher.dispatch(message)
        return self.seen(outcome, "unchanged" if self.inbox.get(outcome.key) == before else "")

    def key(self, message: PushMessage) -> str:
        return self.dispatcher.classify(message).key

    def refused(self, error: ConsumerError) -> Seen:
        """A delivery its source could not read: decided with nothing stored."""
        return self.seen(self.dispatcher.refuse(Source.PUSH, error), self.stored())

    def stored(self) -> str:
        return "nothing stored" if not self.inbox.list() else "stored"

    def keeping(self, message: PushMessage) -> Seen:
        """``push``, the row told with whether it kept the whole message (for a replay)."""
        outcome = self.dispatcher.dispatch(message)
        row = self.inbox.get(outcome.key)
        kept = row is not None and PushMessage.from_json(row.message) == message
        return self.seen(outcome, described(row) + (", full message kept" if kept else ""))


RAISED: dict[str, Callable[[], BaseException]] = {
    "retryable": lambda: Retryable("transient failure, try again"),
    "crash": lambda: RuntimeError("an unexpected error"),
    "incomplete": lambda: Incomplete("a chunk committed, more to do"),
    "permanent": lambda: Permanent("this event can never succeed"),
    "skip": lambda: Skip("nothing to do"),
}


def described(row: InboxRow | None) -> str:
    if row is None:
        return "none written"
    refunded = ", the attempt refunded" if row.status is Status.FAILED and not row.attempts else ""
    return row.status.value + refunded


def deploy(release: str, message_id: str = "m-1", **attributes: str) -> PushMessage:
    body = deploy_body("web", release, message_id=message_id)
    body["message"].setdefault("attributes", {}).update(attributes)
    return parse_wrapped(body, Limits())


def tick(at: datetime, **attributes: str) -> PushMessage:
    body = tick_body("beat", publish_time=at)
    body["message"]["attributes"].update(attributes)
    return parse_wrapped(body, Limits())


def handled_now(rig: Rig) -> list[Seen]:
    return [rig.push(deploy("r1"))]


def duplicate(rig: Rig) -> list[Seen]:
    first = [deploy("r1"), deploy("r2", act="permanent"), deploy("r3", act="skip"), opaque()]
    for message in first:
        rig.push(message)
    return [rig.again(message) for message in first]


def in_progress(rig: Rig) -> list[Seen]:
    running = deploy("r1", message_id="running")
    assert rig.inbox.claim(rig.key(running), "deploy", running, rig.clock(), rig.lease)
    hooked = replace(deploy("r2", message_id="hook"), format=Format.DEPLOY_HOOK)
    assert rig.inbox.claim(rig.key(hooked), "deploy", hooked, rig.clock(), rig.lease)
    copies = [deploy("r1", message_id="copy"), running, deploy("r2", message_id="copy")]
    return [rig.again(message) for message in copies]


def retried(rig: Rig) -> list[Seen]:
    return [rig.push(deploy("r1", act="retryable")), rig.push(deploy("r2", act="crash"))]


def incomplete(rig: Rig) -> list[Seen]:
    return [rig.push(deploy("r1", act="incomplete"))]


def dead(rig: Rig) -> list[Seen]:
    failing = deploy("r2", act="retryable")
    for _ in range(MAX_ATTEMPTS - 1):
        rig.push(failing)
    return [rig.keeping(deploy("r1", act="permanent")), rig.keeping(failing)]


def opaque() -> PushMessage:
    body = wrapped_body(data=b"opaque", attributes={"origin": "elsewhere"}, message_id="42")
    return parse_wrapped(body, Limits())


def unroutable(rig: Rig) -> list[Seen]:
    return [rig.keeping(opaque())]


def skipped(rig: Rig) -> list[Seen]:
    rig.push(tick(NOW))
    return [rig.push(tick(NOW - timedelta(seconds=61))), rig.push(deploy("r1", act="skip"))]


def from_the_future(rig: Rig) -> list[Seen]:
    return [rig.push(tick(NOW + timedelta(days=3)))]


def lease_lost_acked(rig: Rig) -> list[Seen]:
    return [owned(rig, deploy("r1", act="taken-by-other"), "owner"),
            owned(rig, deploy("r2", act="taken-by-finished"), "owner")]  # fmt: skip


def lease_lost_nacked(rig: Rig) -> list[Seen]:
    return [owned(rig, deploy("r1", act="taken-by-copy"), "m-1")]


def owned(rig: Rig, message: PushMessage, owner: str) -> Seen:
    outcome = rig.dispatcher.dispatch(message)
    row = rig.inbox.get(outcome.key)
    return rig.seen(outcome, "the new owner's" if row and row.message_id == owner else "")


def refused(rig: Rig) -> list[Seen]:
    settings = rig.settings.with_values(
        local_mode=False, push_token="t" * 32, sources=SOURCES, signing_secrets=(SECRET,)
    )
    rig.dispatcher = rig.built(settings, rig.engine)
    forged = replace(tick(NOW), subscription=SUBSCRIPTIONS + "deploys-push")
    run_now = replace(tick(NOW, run_now="x1"), subscription=SUBSCRIPTIONS + "ticks-push")
    return [refusal(rig, message) for message in (forged, run_now)]


def refusal(rig: Rig, message: PushMessage) -> Seen:
    outcome = rig.dispatcher.dispatch(message)
    row = rig.inbox.get(outcome.key)
    mine = f"refused:{message.subscription}:{message.message_id}"
    kept = row is not None and PushMessage.from_json(row.message) == message
    inbox = f"{described(row)} under refused:SUBSCRIPTION:MESSAGE_ID, full message kept"
    return rig.seen(outcome, inbox if outcome.key == mine and kept else "")


def database_unreachable(rig: Rig) -> list[Seen]:
    urls = {"sqlite": "sqlite:////nonexistent/dir/inbox.db",
            "postgresql": "postgresql+psycopg://postgres@127.0.0.1:1/nowhere"}  # fmt: skip
    down = make_engine(urls[rig.engine.dialect.name])
    try:
        outcome = rig.built(rig.settings, down).dispatch(deploy("r1"))
    finally:
        down.dispose()
    return [rig.seen(outcome, "nothing written" if not rig.inbox.list() else "written")]


def malformed(rig: Rig) -> list[Seen]:
    try:
        parse_push({"Content-Type": "application/json"}, b"{not json")
    except ConsumerError as error:
        envelope = rig.refused(error)
    incomplete_event = parse_wrapped(wrapped_body(data=b"{}", attributes={"event": "deploy"}),
                                     Limits())  # fmt: skip
    event = rig.seen(rig.dispatcher.dispatch(incomplete_event), rig.stored())
    return [envelope, event]


def unauthorized(rig: Rig) -> list[Seen]:
    return [rig.refused(Unauthorized("missing token")), rig.refused(Forbidden("wrong caller"))]


def too_large(rig: Rig) -> list[Seen]:
    return [rig.refused(BodyTooLarge())]


def too_slow(rig: Rig) -> list[Seen]:
    return [rig.refused(BodyTimeout("The request body did not arrive within 2 s."))]


def large_slot_taken(rig: Rig) -> list[Seen]:
    return [rig.refused(Unavailable("Busy with another large request; retry later."))]
