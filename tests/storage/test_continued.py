"""Continuation of a file import: an import that runs out of budget publishes one continuation
on a real Pub/Sub emulator and is acknowledged; each continuation, pulled from the emulator and
run through the real dispatcher (SQLite and PostgreSQL), resumes at the stored progress point."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.pipeline import continuation
from consumer.storage.model import FileStatus
from consumer.wire.classify import classify
from consumer.wire.envelope import parse_push
from consumer.wire.envelopes_out import storage_body, wrapped_body
from consumer.wire.outcomes import Kind, Outcome
from tests.storage.conftest import Harness, email_csv
from tests.storage.test_long_files import slow_rule, with_plugin
from triggers.local import stack
from triggers.local.services import missing_pubsub

PROJECT = "p"
JSON = {"Content-Type": "application/json"}


@dataclass
class Topic:
    host: str
    path: str
    subscription: str

    def pull(self) -> list[Any]:
        """Every message waiting on the topic's pull subscription, acknowledged."""
        client = stack.subscriber(self.host)
        found: list[Any] = []
        while batch := client.pull(
            subscription=self.subscription, max_messages=10, return_immediately=True
        ).received_messages:
            client.acknowledge(subscription=self.subscription, ack_ids=[m.ack_id for m in batch])
            found += [received.message for received in batch]
        return found


@pytest.fixture(scope="module")
def pubsub_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if reason := missing_pubsub():
        pytest.skip(reason)
    port = stack.free_port()
    service = stack.start_pubsub(port, tmp_path_factory.mktemp("pubsub") / "log", PROJECT)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        service.stop()


@pytest.fixture
def topic(pubsub_host: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Topic:
    """A fresh continuation topic with a pull subscription; this process publishes to the
    emulator (a client of its own, not one made for another test's emulator)."""
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_host)
    monkeypatch.setattr(continuation, "_clients", {})
    name = f"c{abs(hash(str(tmp_path))) % 10**12}"
    path = stack.ensure_topic(pubsub_host, PROJECT, name)
    subscription = f"projects/{PROJECT}/subscriptions/{name}-pull"
    stack.subscriber(pubsub_host).create_subscription(name=subscription, topic=path)
    return Topic(pubsub_host, path, subscription)


def deliver(harness: Harness, message: Any, message_id: str = "") -> Outcome:
    """A pulled message pushed through the dispatcher, as the push subscription would."""
    body = wrapped_body(
        message.data, dict(message.attributes), message_id or message.message_id,
        message.publish_time,
    )  # fmt: skip
    pushed = parse_push({"Content-Type": "application/json"}, json.dumps(body).encode())
    return harness.dispatcher.dispatch(pushed)


def budgeted(
    harness: Harness, topic: str, delay: float = 0.3, ack_deadline_seconds: int = 10
) -> Harness:
    """A 3 s budget by default (the ack deadline less 7 s kept back to publish and answer),
    batches of 100 rows taking ``delay`` seconds each: a few batches per delivery."""
    with_plugin(harness)
    return harness.with_rules(
        [slow_rule(harness, delay)], ack_deadline_seconds=ack_deadline_seconds,
        safety_margin_seconds=7, continuation_topic=topic, max_attempts=2,
    )  # fmt: skip


def test_an_import_out_of_budget_is_carried_on_by_continuations_exactly_once(
    harness: Harness, topic: Topic
) -> None:
    slow = budgeted(harness, topic.path)
    generation = slow.upload("long.csv", email_csv(2000))
    first = slow.notify("long.csv", generation)
    assert (first.kind, first.http_status) == (Kind.DONE, 200), first.details
    assert first.details["status"] == "running" and first.details["stopped"] == "budget"
    original = Inbox(slow.engine).get(first.key)
    assert original is not None and original.status is Status.DONE
    outcomes, keys = [first], [first.key]
    while "continuation" in outcomes[-1].details:
        [message] = topic.pull()  # exactly ONE continuation per stop
        assert dict(message.attributes) == {
            "eventType": "OBJECT_FINALIZE", "payloadFormat": "NONE", "bucketId": slow.bucket,
            "objectId": "long.csv", "objectGeneration": str(generation),
            "continuation": message.attributes["continuation"],
        }  # fmt: skip
        outcomes.append(deliver(slow, message))
        keys.append(outcomes[-1].key)
        assert outcomes[-1].key == outcomes[-2].details["continuation"]
        assert deliver(slow, message, "again").kind is Kind.DUPLICATE  # delivered twice: once
        assert len(outcomes) < 25, [outcome.details for outcome in outcomes]
    assert len(outcomes) > 2  # more deliveries than max_attempts, none of them nacked
    assert all(outcome.kind is Kind.DONE for outcome in outcomes)
    assert len(set(keys)) == len(keys)
    row = slow.file("long.csv", generation)
    assert row.status is FileStatus.DONE and outcomes[-1].details["status"] == "done"
    assert (row.progress.rows_accepted, row.progress.jobs_created) == (2000, 2000)
    job_keys = slow.job_keys()
    assert len(job_keys) == len(set(job_keys)) == 2000
    assert topic.pull() == []


def test_a_continuation_for_a_finished_import_does_nothing(harness: Harness, topic: Topic) -> None:
    # A 53 s budget: under load 300 rows once outlasted 3 s, and this test is about the late
    # continuation, not about the budget.
    slow = budgeted(harness, topic.path, delay=0.0, ack_deadline_seconds=60)
    generation = slow.upload("short.csv", email_csv(300))
    assert slow.notify("short.csv", generation).details["status"] == "done"
    late = {
        **storage_body(slow.bucket, "short.csv", str(generation))["message"]["attributes"],
        "continuation": "0123abcd",
    }
    message = parse_push(
        {"Content-Type": "application/json"}, json.dumps(wrapped_body(attributes=late)).encode()
    )
    outcome = slow.dispatcher.dispatch(message)
    assert outcome.kind is Kind.DONE and outcome.details["outcome"] == "already processed"
    assert outcome.key.endswith(":OBJECT_FINALIZE:continuation:0123abcd")
    assert slow.job_count() == 300 and topic.pull() == []


def test_when_publishing_fails_the_delivery_is_nacked_as_without_a_topic(
    harness: Harness, topic: Topic
) -> None:
    missing = f"projects/{PROJECT}/topics/no-such-topic"
    slow = budgeted(harness, missing)
    generation = slow.upload("long.csv", email_csv(1000))
    outcome = slow.notify("long.csv", generation)
    assert (outcome.kind, outcome.http_status) == (Kind.RETRY, 503), outcome.details
    assert "time budget exhausted" in outcome.details["error"]
    inbox = Inbox(slow.engine).get(outcome.key)
    assert inbox is not None and inbox.status is Status.FAILED
    assert 0 < slow.file("long.csv", generation).progress.rows_accepted < 1000


def test_a_continuation_has_its_own_key_and_the_notification_keeps_its_own() -> None:
    attributes = storage_body("b", "a/x.csv", "7")["message"]["attributes"]
    plain = parse_push(JSON, json.dumps(wrapped_body(attributes=attributes)).encode())
    carried = parse_push(
        JSON, json.dumps(wrapped_body(attributes={**attributes, "continuation": "u1"})).encode()
    )
    assert classify(plain, lambda task: 60).key == "storage:b/a/x.csv#7:OBJECT_FINALIZE"
    assert classify(carried, lambda task: 60).key == (
        "storage:b/a/x.csv#7:OBJECT_FINALIZE:continuation:u1"
    )
