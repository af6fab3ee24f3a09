"""The outcome table as implemented: each situation gives its documented status and inbox row
(dead rows, replays and ticks: test_dead_and_ticks.py)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.errors import BodyTimeout, BodyTooLarge, ConsumerError, Unavailable
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.service import Service
from consumer.sources.replay import replay
from consumer.wire.envelopes_out import deploy_body, storage_body, wrapped_body
from consumer.wire.outcomes import from_error, from_http_status, lease_lost
from tests.conftest import Clock
from tests.plugins.effects import effect_rows
from tests.wire.outcomes.push import post, with_attributes

# Leases and tick slots are deterministic: the clock moves only by hand.
pytestmark = pytest.mark.clock(datetime(2026, 11, 29, 12, 0, 1, tzinfo=UTC))


def test_handled_now_is_200_with_the_handler_result(client: FlaskClient, engine: Engine) -> None:
    status, body = post(client, deploy_body("web", "r1"))
    assert (status, body["outcome"], body["effect"]) == (200, "done", "recorded")
    assert len(effect_rows(engine)) == 1


def test_redelivery_is_a_duplicate_with_no_second_effect(
    client: FlaskClient, engine: Engine
) -> None:
    first = deploy_body("web", "r1")
    post(client, first)
    status, body = post(client, first)
    assert (status, body["outcome"], body["status"]) == (200, "duplicate", "done")
    assert len(effect_rows(engine)) == 1


def test_storage_duplicate_with_a_new_message_id_has_one_effect(
    client: FlaskClient, engine: Engine
) -> None:
    outcomes = [post(client, storage_body("b", "f.csv", "17"))[1]["outcome"] for _ in range(3)]
    assert outcomes == ["done", "duplicate", "duplicate"]
    assert len(effect_rows(engine)) == 1
    # A new generation of the same object is a new file.
    assert post(client, storage_body("b", "f.csv", "18"))[1]["outcome"] == "done"
    assert len(effect_rows(engine)) == 2


def test_running_elsewhere_is_409_until_the_lease_expires(
    client: FlaskClient, engine: Engine, clock: Clock, effect_settings: Settings
) -> None:
    body = deploy_body("web", "r2")
    message = json.loads(json.dumps(body))
    from consumer.wire.classify import classify
    from consumer.wire.envelope import parse_push

    event = classify(parse_push({}, json.dumps(message).encode()), lambda _: 60)
    lease = timedelta(seconds=effect_settings.lease_seconds)
    assert Inbox(engine).claim(event.key, "deploy", event.message, clock(), lease) is not None
    status, answer = post(client, body)
    assert (status, answer["outcome"]) == (409, "in-progress")
    clock.now += lease + timedelta(seconds=1)
    status, answer = post(client, body)
    assert (status, answer["outcome"], answer["attempt"]) == (200, "done", 2)
    assert len(effect_rows(engine)) == 1


def test_retryable_error_is_503_and_a_redelivery_succeeds(
    client: FlaskClient, engine: Engine
) -> None:
    body = with_attributes(deploy_body("web", "r3"), fail="retryable-once")
    status, answer = post(client, body)
    assert (status, answer["outcome"]) == (503, "retry")
    assert "transient failure" in answer["error"]
    assert Inbox(engine).get(answer["key"]).status is Status.FAILED  # type: ignore[union-attr]
    status, answer = post(client, body)
    assert (status, answer["outcome"], answer["attempt"]) == (200, "done", 2)
    assert len(effect_rows(engine)) == 1


def test_an_error_message_no_database_stores_is_recorded_escaped(
    client: FlaskClient, engine: Engine
) -> None:
    status, answer = post(client, with_attributes(deploy_body("web", "nul"), fail="unstorable"))
    assert (status, answer["outcome"]) == (503, "retry")
    row = Inbox(engine).get("deploy:web:nul")
    assert row is not None and row.status is Status.FAILED
    assert row.error is not None and "\\x00" in row.error and "\\udc80" in row.error


def test_a_result_that_is_not_plain_json_still_completes_the_event(
    client: FlaskClient, engine: Engine
) -> None:
    status, answer = post(client, with_attributes(deploy_body("web", "odd"), odd_result="1"))
    assert (status, answer["outcome"], answer["text"]) == (200, "done", "nul\\x00")
    row = Inbox(engine).get("deploy:web:odd")
    assert row is not None and row.status is Status.DONE and row.result["7"] == "{1, 2}"
    assert post(client, deploy_body("web", "odd"))[1]["outcome"] == "duplicate"
    assert len(effect_rows(engine)) == 1


def test_unknown_message_is_recorded_unroutable(client: FlaskClient, engine: Engine) -> None:
    body = wrapped_body(data=b"opaque", attributes={"origin": "elsewhere"}, message_id="42")
    status, answer = post(client, body)
    assert (status, answer["outcome"]) == (200, "unroutable")
    row = Inbox(engine).get(answer["key"])
    assert row is not None and row.status is Status.UNROUTABLE and row.message["data"] == "b3BhcXVl"


def claim_elsewhere(engine: Engine, body: dict[str, Any], clock: Clock, **message: Any) -> None:
    """Claim the event of ``body`` as another delivery would (live lease), as ``message`` says."""
    from dataclasses import replace

    from consumer.wire.classify import classify
    from consumer.wire.envelope import parse_push

    event = classify(parse_push({}, json.dumps(body).encode()), lambda _: 60)
    running = replace(event.message, **message)
    lease = timedelta(seconds=60)
    assert Inbox(engine).claim(event.key, "deploy", running, clock(), lease) is not None


def test_a_copy_under_another_message_id_is_acked_only_its_own_redelivery_is_nacked(
    client: FlaskClient, engine: Engine, clock: Clock
) -> None:
    """The running delivery's own message stays unacknowledged (409) and comes back if its pod
    dies; any other copy can be acknowledged (200) instead of slowing the subscription."""
    running = deploy_body("web", "r9", message_id="running-1")
    claim_elsewhere(engine, running, clock)
    copy = deploy_body("web", "r9", message_id="copy-2")
    assert [post(client, copy)[0], post(client, running)[0]] == [200, 409]
    assert {post(client, copy)[1]["outcome"], post(client, running)[1]["outcome"]} == {
        "in-progress"
    }
    clock.now += timedelta(seconds=61)  # the running pod died; its message comes back
    status, answer = post(client, running)
    assert (status, answer["outcome"], answer["attempt"]) == (200, "done", 2)
    assert post(client, copy)[1]["outcome"] == "duplicate"
    assert len(effect_rows(engine)) == 1


def test_a_copy_of_an_event_running_from_a_hook_is_nacked(
    client: FlaskClient, engine: Engine, clock: Clock
) -> None:
    """Nobody redelivers a hook's request if its pod dies: every copy must stay alive."""
    from consumer.wire.message import Format

    body = deploy_body("web", "r10", message_id="copy-1")
    claim_elsewhere(engine, body, clock, message_id="hook-1", format=Format.DEPLOY_HOOK)
    assert post(client, body)[:1] == (409,)
    assert post(client, body)[1]["outcome"] == "in-progress"


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


DECISION_FIELDS = ("source", "route", "message_id", "key", "outcome", "status", "attempt")


def test_every_decision_is_one_line_with_one_schema_whatever_the_source(
    client: FlaskClient, engine: Engine, effect_settings: Settings
) -> None:
    logger, lines = logging.getLogger("consumer.decisions"), Lines()
    logger.addHandler(lines)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        post(client, deploy_body("web", "logged", message_id="m-1"))
        client.post("/push", data=b"{not json")
        key = post(client, with_attributes(deploy_body("web", "dead"), fail="permanent"))[1]
        replay(Service.of(effect_settings, engine), key["key"])
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
    decided = [{name: getattr(r, name) for name in DECISION_FIELDS} for r in lines.records]
    assert [(d["source"], d["route"], d["outcome"], d["status"]) for d in decided] == [
        ("push", "deploy", "done", 200),
        ("push", "-", "rejected", 400),
        ("push", "deploy", "dead", 200),
        ("replay", "deploy", "dead", 200),
    ]
    assert decided[0]["message_id"] == "m-1" and decided[0]["key"] == "deploy:web:logged"
    assert decided[0]["attempt"] == 1 and decided[1]["key"] is None
    assert all(isinstance(r.duration_ms, float) for r in lines.records)


@pytest.mark.parametrize(
    ("error", "status", "outcome"),
    [
        (BodyTimeout("The request body did not arrive within 2 s."), 408, "rejected"),
        (BodyTooLarge(), 413, "rejected"),
        (Unavailable("Busy with another large request; retry later."), 503, "unavailable"),
    ],
)
def test_the_transport_refusals_come_from_the_table(
    error: ConsumerError, status: int, outcome: str
) -> None:
    """The bridge's own refusals (a slow body, an oversized one, the busy large-body slot):
    statuses that make Pub/Sub redeliver, bodies like every other refusal's."""
    refused = from_error(error)
    assert (refused.http_status, refused.acked) == (status, False)
    assert refused.body() == {"outcome": outcome, "key": "", "error": error.message}


def test_the_web_frameworks_errors_come_from_the_table() -> None:
    assert from_http_status(405, "Method Not Allowed").body()["outcome"] == "rejected"
    bug = from_http_status(500, "Internal Server Error")
    assert (bug.http_status, bug.body()["outcome"]) == (500, "error")


def test_a_lost_lease_is_acknowledged_only_when_left_to_another_delivery() -> None:
    """A lost lease is a nack unless the row is finished or another redelivered message holds
    it (``tests/pipeline/test_lost_lease.py`` plays both through the dispatcher)."""
    left = lease_lost("k", "deploy", {"attempt": 1}, left_to_another=True)
    kept = lease_lost("k", "deploy", {"attempt": 1}, left_to_another=False)
    assert (left.http_status, left.acked, left.body()["outcome"]) == (200, True, "lease-lost")
    assert (kept.http_status, kept.acked, kept.body()["outcome"]) == (409, False, "lease-lost")
