"""A source starts only what it is for: each subscription only its declared routes, ``/ticks``
only ticks, the deploy hook only deploys; ``run_now`` and continuations only when the service
signed them; the operator's CLI and replay trusted; a refusal recorded ``dead`` under a key of
its own and acknowledged. Through the real dispatcher and inbox, on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.errors import NotReplayable
from consumer.inbox.store import Status
from consumer.pipeline.decision_log import Source
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.service import Service
from consumer.sources.replay import replay
from consumer.ticks import controls as tasks
from consumer.wire import signed
from consumer.wire.envelopes_out import deploy_body, storage_body, wrapped_body
from consumer.wire.message import PushMessage
from consumer.wire.outcomes import Kind
from consumer.wire.timeutil import utcnow

PROJECT = "projects/p/subscriptions/"
SECRET = "signing-secret-0123456789"
SOURCES = {
    "ticks-push": frozenset({"tick"}),
    "jobs-push": frozenset({"job"}),
    "storage-push": frozenset({"storage"}),
    "deploys-push": frozenset({"deploy"}),
    f"{PROJECT}continuations-push": frozenset({"tick", "storage"}),
}
ROUTE_ATTEMPTS: dict[str, dict[str, Any]] = {
    "tick": {"attributes": {"task": "billing"}},
    "run_now": {"attributes": {"task": "billing", "run_now": "x1"}},
    "continuation": {"attributes": {"task": "billing", "continuation": "c1"}},
    "job": {"attributes": {"job_kind": "record"}, "data": b"{}"},
    "other": {"attributes": {"anything": "else"}},
}


def message(
    subscription: str, attributes: dict[str, str], data: bytes = b"", **fields: Any
) -> PushMessage:
    """A message as Pub/Sub pushes it from ``subscription`` (a short name in project ``p``)."""
    message_id = fields.pop("message_id", uuid.uuid4().hex)
    return PushMessage(message_id, utcnow(), data=data, attributes=attributes,
                       subscription=PROJECT + subscription, **fields)  # fmt: skip


def from_body(body: dict[str, Any], subscription: str) -> PushMessage:
    """The message of a push body made by ``consumer.wire.envelopes_out``."""
    inner = body["message"]
    data = base64.b64decode(inner["data"]) if inner.get("data") else b""
    return message(subscription, inner.get("attributes", {}), data)


class Calls:
    def __init__(self) -> None:
        self.ran: list[tuple[str, str]] = []

    def __call__(self, what: str) -> Any:
        def handler(context: Any, event: Any) -> dict[str, Any]:
            self.ran.append((what, context.key))
            return {}

        return handler


@pytest.fixture
def calls() -> Calls:
    return Calls()


def enforced(settings: Settings, **changes: Any) -> Settings:
    values = {"local_mode": False, "push_token": "t" * 32, "sources": SOURCES,
              "signing_secrets": (SECRET,), "plugins": ("tests.jobs.kinds_plugin",)}  # fmt: skip
    return settings.with_values(**{**values, **changes})


def dispatcher_for(settings: Settings, engine: Engine, calls: Calls) -> Dispatcher:
    registry = build_registry(settings)
    registry.tick("billing", period_seconds=60)(calls("tick"))
    registry.storage(calls("storage"), replace=True)
    registry.deploy(calls("deploy"), replace=True)
    registry.route("message", calls("other"))
    return Dispatcher(settings, engine, registry)


@pytest.fixture
def dispatcher(engine: Engine, settings: Settings, calls: Calls) -> Dispatcher:
    return dispatcher_for(enforced(settings), engine, calls)


def attempts_from(subscription: str) -> list[tuple[str, PushMessage]]:
    """Every route but ``subscription``'s own, as a publisher on it could try."""
    made = [
        (name, message(subscription, dict(spec["attributes"]), spec.get("data", b""),
                       message_id=f"{subscription}-{name}"))
        for name, spec in ROUTE_ATTEMPTS.items()
    ]  # fmt: skip
    made.append(("deploy", from_body(deploy_body("web", "r-forged"), subscription)))
    made.append(("storage", from_body(storage_body("uploads", "x.csv", "1"), subscription)))
    return made


@pytest.mark.parametrize(
    ("subscription", "own"),
    [("jobs-push", "job"), ("storage-push", "storage"), ("deploys-push", "deploy")],
)
def test_a_subscription_starts_nothing_outside_its_own_route(
    dispatcher: Dispatcher, calls: Calls, subscription: str, own: str
) -> None:
    for name, forged in attempts_from(subscription):
        if name == own:
            continue
        outcome = dispatcher.dispatch(forged)
        assert (outcome.kind, outcome.http_status) == (Kind.DEAD, 200), name
        assert outcome.key == f"refused:{PROJECT}{subscription}:{forged.message_id}"
        assert "refused:" in outcome.details["error"]
        row = dispatcher.inbox.get(outcome.key)
        assert row is not None and row.status is Status.DEAD
        assert PushMessage.from_json(row.message) == forged  # the full message is kept
    assert calls.ran == []
    assert dispatcher.inbox.list(status=Status.DONE) == []


def test_a_jobs_topic_message_cannot_run_a_task_now(dispatcher: Dispatcher, calls: Calls) -> None:
    """The finding: three messages {"task": "monthly-billing", "run_now": "x1"} made 3 runs."""
    for n in range(3):
        forged = message("jobs-push", {"task": "billing", "run_now": "x1"}, message_id=f"r{n}")
        assert dispatcher.dispatch(forged).kind is Kind.DEAD
    assert calls.ran == []


def test_an_unsigned_run_now_is_refused_even_where_ticks_may_come(
    dispatcher: Dispatcher, calls: Calls
) -> None:
    forged = dispatcher.dispatch(message("ticks-push", {"task": "billing", "run_now": "x1"}))
    assert forged.kind is Kind.DEAD and "did not sign" in forged.details["error"]
    assert calls.ran == []


def test_a_refused_forgery_does_not_take_the_genuine_ticks_slot(
    dispatcher: Dispatcher, calls: Calls
) -> None:
    forged = dispatcher.dispatch(message("jobs-push", {"task": "billing"}, message_id="f1"))
    genuine = dispatcher.dispatch(message("ticks-push", {"task": "billing"}, message_id="g1"))
    assert forged.kind is Kind.DEAD and forged.key.startswith("refused:")
    assert genuine.kind is Kind.DONE and genuine.key.startswith("tick:billing:")
    assert [what for what, _ in calls.ran] == ["tick"]


def test_a_refusal_delivered_again_is_a_duplicate(dispatcher: Dispatcher) -> None:
    forged = message("jobs-push", {"task": "billing"}, message_id="again")
    assert dispatcher.dispatch(forged).kind is Kind.DEAD
    again = dispatcher.dispatch(forged)
    assert (again.kind, again.details["status"], again.http_status) == (Kind.DUPLICATE, "dead", 200)


def signed_continuation(secret: str, **extra: str) -> PushMessage:
    attributes = signed.sign(b"", {"task": "billing", "continuation": "wake-1"}, secret)
    return message("continuations-push", {**attributes, **extra})


def test_only_the_services_own_continuations_are_honoured(
    dispatcher: Dispatcher, calls: Calls
) -> None:
    unsigned = message("continuations-push", {"task": "billing", "continuation": "c1"})
    assert dispatcher.dispatch(unsigned).kind is Kind.DEAD
    assert dispatcher.dispatch(signed_continuation("another-secret-0123456789")).kind is Kind.DEAD
    moved = signed_continuation(SECRET, task="cleanup")  # the signature on other attributes
    assert dispatcher.dispatch(moved).kind is Kind.DEAD
    assert calls.ran == []
    assert dispatcher.dispatch(signed_continuation(SECRET)).kind is Kind.DONE
    assert calls.ran == [("tick", "tick:billing:continuation:wake-1")]


def test_a_rotation_honours_both_secrets(engine: Engine, settings: Settings, calls: Calls) -> None:
    rotated = enforced(settings, signing_secrets=("new-secret-0123456789", SECRET))
    dispatcher = dispatcher_for(rotated, engine, calls)
    assert dispatcher.dispatch(signed_continuation(SECRET)).kind is Kind.DONE


def test_a_storage_continuation_must_be_signed(dispatcher: Dispatcher, calls: Calls) -> None:
    notification = from_body(storage_body("uploads", "a.csv", "7"), "continuations-push")
    attributes = {**notification.attributes, "continuation": "c9"}
    forged = message("continuations-push", attributes, notification.data)
    assert dispatcher.dispatch(forged).kind is Kind.DEAD
    genuine = message("continuations-push", signed.sign(forged.data, attributes, SECRET),
                      forged.data)  # fmt: skip
    assert dispatcher.dispatch(genuine).kind is Kind.DONE
    assert [what for what, _ in calls.ran] == ["storage"]


def test_an_undeclared_subscription_starts_nothing(dispatcher: Dispatcher, calls: Calls) -> None:
    outcome = dispatcher.dispatch(message("unknown-push", {"task": "billing"}))
    assert outcome.kind is Kind.DEAD
    assert "is not declared in CONSUMER_SOURCES" in outcome.details["error"]
    assert calls.ran == []


def test_the_http_endpoints_start_their_own_route_only(dispatcher: Dispatcher) -> None:
    deploy = dispatcher.classify(from_body(deploy_body("web", "r1"), "deploys-push"))
    tick = dispatcher.classify(message("ticks-push", {"task": "billing"}))
    assert dispatcher.handle(deploy, Source.TICKS).kind is Kind.DEAD
    assert dispatcher.handle(tick, Source.HOOK).kind is Kind.DEAD
    assert dispatcher.handle(tick, Source.TICKS).kind is Kind.DONE
    assert dispatcher.handle(deploy, Source.HOOK).kind is Kind.DONE


def test_the_operators_own_ways_in_are_trusted(
    engine: Engine, settings: Settings, calls: Calls
) -> None:
    service = Service.of(enforced(settings), engine)
    service.registry.tick("billing", period_seconds=60)(calls("tick"))
    assert tasks.run_now(service, "billing", "ops@example.com").kind is Kind.DONE  # unsigned
    assert [what for what, _ in calls.ran] == ["tick"]


def test_a_refusal_cannot_be_replayed_into_a_run(dispatcher: Dispatcher, engine: Engine) -> None:
    refused = dispatcher.dispatch(message("jobs-push", {"task": "billing"}))
    service = Service(dispatcher.settings, dispatcher.registry, engine)
    with pytest.raises(NotReplayable, match="would now run as"):
        replay(service, refused.key)


def test_local_mode_keeps_the_permissive_routing(
    engine: Engine, settings: Settings, calls: Calls
) -> None:
    local = dispatcher_for(settings.with_values(sources=SOURCES), engine, calls)
    assert local.dispatch(message("jobs-push", {"task": "billing", "run_now": "x"})).acked
    assert [what for what, _ in calls.ran] == ["tick"]


def test_the_refused_message_is_kept_whole(dispatcher: Dispatcher) -> None:
    data = json.dumps({"service": "web", "release": "r1", "event": "deploy"}).encode()
    forged = message("jobs-push", {"event": "deploy"}, data, message_id="d1", ordering_key="o")
    outcome = dispatcher.dispatch(forged)
    row = dispatcher.inbox.get(outcome.key)
    assert row is not None and row.route == "deploy" and row.error == outcome.details["error"]
    assert PushMessage.from_json(row.message) == forged


def test_wrapped_body_pushes_are_declared_by_their_short_name() -> None:
    settings = Settings.of(sources={"consumer-push": frozenset({"tick"})})
    body = wrapped_body(attributes={"task": "sweep"})
    assert settings.admission.routes_of(body["subscription"]) == frozenset({"tick"})
    assert settings.admission.routes_of("") is None
