"""The jobs topic: a message naming a job kind enqueues one job under its key, through the real
dispatcher (inbox included). Bad jobs are recorded ``dead`` with the message, and a producer's
payload keeps only the fields its kind lets it set."""

from __future__ import annotations

import json
from datetime import UTC, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.jobs.model import Job
from consumer.jobs.store import JobStore
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.service import Service
from consumer.sources.replay import replay
from consumer.wire.events import JobEvent
from consumer.wire.message import PushMessage
from consumer.wire.outcomes import Kind
from consumer.wire.timeutil import utcnow

SUBSCRIPTION = "projects/p/subscriptions/jobs-push"
HOSTILE = {
    "to": "reader@example.com", "subject": "Hi", "text": "Hello",
    "from": "ceo@example.com", "bcc": ["spy@attacker.example"], "cc": "x@attacker.example",
    "reply_to": "spy@attacker.example", "headers": {"Bcc": "spy@attacker.example"},
}  # fmt: skip


def job_message(message_id: str, payload: Any = None, **attributes: str) -> PushMessage:
    if isinstance(payload, bytes):
        data = payload
    else:
        data = b"" if payload is None else json.dumps(payload).encode()
    attributes.setdefault("job_kind", "email")
    return PushMessage(message_id, utcnow(), data=data, attributes=attributes,
                       subscription=SUBSCRIPTION)  # fmt: skip


@pytest.fixture
def dispatcher(engine: Engine, settings: Settings) -> Dispatcher:
    settings = settings.with_values(plugins=("tests.jobs.kinds_plugin",))
    return Dispatcher(settings, engine, build_registry(settings))


def jobs(engine: Engine) -> list[Job]:
    return JobStore(engine).list(limit=100)


def test_a_job_message_is_a_job_event_keyed_by_its_job_key() -> None:
    event = JobEvent("email", job_message("m1", job_key="order-7"), {"key": "order-7"})
    assert (event.key, event.route.value) == ("job:topic:order-7", "job")
    unkeyed = JobEvent("email", job_message("m1"))
    assert unkeyed.job_key == f"{SUBSCRIPTION}:m1"


def test_the_same_key_published_twice_is_one_job(dispatcher: Dispatcher, engine: Engine) -> None:
    payload = {"to": "a@example.com", "subject": "s", "text": "t"}
    run_at = (utcnow() + timedelta(days=2)).replace(microsecond=0)
    attributes = {"job_key": "order-7", "job_priority": "5", "job_max_attempts": "3",
                  "job_run_at": run_at.isoformat()}  # fmt: skip
    first = dispatcher.dispatch(job_message("m1", payload, **attributes))
    again = dispatcher.dispatch(job_message("m2", payload, **attributes))
    assert (first.kind, first.key, first.details["inserted"]) == (
        Kind.DONE, "job:topic:order-7", True
    )  # fmt: skip
    assert again.kind is Kind.DUPLICATE
    [job] = jobs(engine)
    assert (job.kind, job.payload, job.priority, job.max_attempts) == ("email", payload, 5, 3)
    assert job.run_at.astimezone(UTC) == run_at


def test_without_a_key_one_message_delivered_twice_is_one_job(
    dispatcher: Dispatcher, engine: Engine
) -> None:
    for _ in range(2):
        dispatcher.dispatch(job_message("m9", {}, job_kind="record"))
    [job] = jobs(engine)
    assert job.kind == "record"
    assert JobStore(engine).get(job.id) is not None


@pytest.mark.parametrize(
    ("payload", "attributes", "reason"),
    [
        ({}, {"job_kind": "nope"}, "unknown job kind 'nope'"),
        ({}, {"job_run_at": "tomorrow"}, "'job_run_at' is not an RFC 3339 time"),
        ({}, {"job_run_at": "2030-01-01T09:00:00"}, "no time zone"),
        ({}, {"job_priority": "high"}, "'job_priority' must be a whole number"),
        ({}, {"job_max_attempts": "0"}, "'job_max_attempts' must be in 1.."),
        ([1, 2], {}, "must be a JSON object, not list"),
        (b"{not json", {}, "not valid JSON"),
        ({"text": "x" * 70_000}, {}, "over the 65536-byte limit"),
    ],
)
def test_a_bad_job_is_dead_with_its_reason_and_no_job(
    dispatcher: Dispatcher, engine: Engine, payload: Any, attributes: dict[str, str], reason: str
) -> None:
    outcome = dispatcher.dispatch(job_message("m1", payload, **attributes))
    assert (outcome.kind, outcome.http_status) == (Kind.DEAD, 200)
    assert reason in outcome.details["error"]
    assert jobs(engine) == []
    assert dispatcher.inbox.get(outcome.key) is not None  # the message is kept, replayable


def test_a_job_of_an_unknown_kind_is_replayable_once_the_kind_exists(
    engine: Engine, settings: Settings
) -> None:
    bare = Dispatcher(settings, engine, build_registry(settings))
    dead = bare.dispatch(job_message("m1", {}, job_kind="record", job_key="k"))
    assert dead.kind is Kind.DEAD
    with_kind = Service.of(settings.with_values(plugins=("tests.jobs.kinds_plugin",)), engine)
    assert replay(with_kind, dead.key).kind is Kind.DONE
    assert [job.kind for job in jobs(engine)] == ["record"]


def test_a_message_cannot_add_recipients_or_change_the_sender(
    dispatcher: Dispatcher, engine: Engine
) -> None:
    outcome = dispatcher.dispatch(job_message("m1", HOSTILE))
    assert outcome.details["ignored_fields"] == ["bcc", "cc", "from", "headers", "reply_to"]
    [job] = jobs(engine)
    assert job.payload == {"to": "reader@example.com", "subject": "Hi", "text": "Hello"}


def test_a_kind_that_declares_no_fields_gets_the_whole_payload(
    dispatcher: Dispatcher, engine: Engine
) -> None:
    dispatcher.dispatch(job_message("m1", {"sleep": 0, "anything": 1}, job_kind="record"))
    assert jobs(engine)[0].payload == {"sleep": 0, "anything": 1}
