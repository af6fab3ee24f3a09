"""The outcome table's rows for dead events and their replay, and for ticks: duplicates in a
slot, stale and future ticks, unknown tasks, and the cleanup task."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.errors import NotReplayable
from consumer.http.app import create_app
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.plugins import build_registry
from consumer.service import Service
from consumer.sources.replay import replay
from consumer.wire.envelopes_out import deploy_body, tick_body, wrapped_body
from tests.conftest import Clock
from tests.plugins.effects import effect_rows
from tests.wire.outcomes.push import post, with_attributes

# Leases and tick slots are deterministic: the clock moves only by hand.
pytestmark = pytest.mark.clock(datetime(2026, 11, 29, 12, 0, 1, tzinfo=UTC))


def test_attempts_exhausted_is_recorded_dead_and_acked(client: FlaskClient, engine: Engine) -> None:
    body = with_attributes(deploy_body("web", "r4"), fail="always")
    statuses = [post(client, body)[0] for _ in range(4)]
    assert statuses == [503, 503, 200, 200]  # max_attempts=3, then a duplicate of a dead row
    row = Inbox(engine).get("deploy:web:r4")
    assert row is not None and row.status is Status.DEAD and row.attempts == 3


def test_incomplete_progress_spends_no_attempt(client: FlaskClient, engine: Engine) -> None:
    """A long job that keeps committing progress outlives max_attempts (3 here) and completes."""
    body = with_attributes(deploy_body("web", "long"), fail="incomplete")
    statuses = [post(client, body)[0] for _ in range(7)]
    assert statuses == [503] * 7
    row = Inbox(engine).get("deploy:web:long")
    assert row is not None and row.status is Status.FAILED and row.attempts == 0
    assert effect_rows(engine) == []


def test_permanent_error_is_dead_with_the_full_message_and_replayable(
    client: FlaskClient, engine: Engine, effect_settings: Settings
) -> None:
    body = with_attributes(deploy_body("web", "r5"), fail="permanent")
    status, answer = post(client, body)
    assert (status, answer["outcome"]) == (200, "dead")
    row = Inbox(engine).get("deploy:web:r5")
    assert row is not None and row.status is Status.DEAD
    assert row.message["attributes"] == body["message"]["attributes"]
    assert row.message["data"] == body["message"]["data"]
    # Replay runs it again through the same pipeline (still permanent: dead again, attempts reset).
    outcome = replay(Service.of(effect_settings, engine), "deploy:web:r5")
    assert outcome.kind.value == "dead" and outcome.details["attempt"] == 1


def test_replay_of_an_unroutable_event_runs_once_a_handler_exists(
    engine: Engine, clock: Clock, settings: Settings
) -> None:
    bare = create_app(Service.of(settings, engine)).test_client()  # no "effect" task
    # Replay runs on the real clock, so the app does too and the tick is published "now" (a
    # tick ahead of the app's clock is refused before anything is recorded).
    status, answer = post(bare, tick_body("effect", publish_time=datetime.now(UTC)))
    assert (status, answer["outcome"]) == (200, "unroutable")
    key = answer["key"]
    with_plugin = Settings(
        settings.database_url, local_mode=True, plugins=("tests.plugins.effects",)
    )
    assert replay(Service.of(with_plugin, engine), key).kind.value == "done"
    assert len(effect_rows(engine)) == 1
    with pytest.raises(NotReplayable):
        replay(Service.of(with_plugin, engine), key)  # finished rows are not replayed


def stored_dead(engine: Engine, body: dict[str, Any], when: datetime, period: int = 60) -> str:
    """Record ``body``'s event dead, as a delivery whose handler failed for good would; its key."""
    from consumer.wire.classify import classify
    from consumer.wire.envelope import parse_push

    message = parse_push({}, json.dumps(body).encode())
    event = classify(message, lambda _: period)
    inbox = Inbox(engine)
    claim = inbox.claim(event.key, event.route, message, when, timedelta(seconds=60))
    assert claim is not None and inbox.finish(claim, Status.DEAD, when, error="broken")
    return event.key


def test_a_tick_whose_schedule_changed_is_not_replayed_under_another_key(
    engine: Engine, effect_settings: Settings
) -> None:
    """Its slot, and so its key, would differ: the replay is refused and the row kept as it was.
    Under the schedule it was recorded with, the same replay runs."""
    from consumer.wire.schedule import Every

    now = datetime.now(UTC)  # replay runs on the real clock
    if now.minute == 0:
        now -= timedelta(minutes=1)  # a minute's slot that is not also the hour's
    key = stored_dead(engine, tick_body("effect", publish_time=now), now)
    hourly = effect_settings.with_values(tick_periods={"effect": Every(3600)})
    with pytest.raises(NotReplayable, match="would now run as 'tick:effect:"):
        replay(Service.of(hourly, engine), key)
    row = Inbox(engine).get(key)
    assert row is not None and (row.status, row.attempts) == (Status.DEAD, 1)
    assert effect_rows(engine) == []
    assert replay(Service.of(effect_settings, engine), key).kind.value == "done"
    assert len(effect_rows(engine)) == 1


def test_a_message_over_a_lowered_limit_is_not_replayed_and_keeps_its_row(
    engine: Engine, effect_settings: Settings
) -> None:
    now = datetime.now(UTC)
    data = json.dumps({"event": "deploy", "service": "web", "release": "r7", "n": [1] * 50})
    body = wrapped_body(data=data.encode(), attributes={"event": "deploy"})
    key = stored_dead(engine, body, now)
    with pytest.raises(NotReplayable, match="no longer a valid event: message data has more"):
        replay(Service.of(effect_settings.with_values(max_json_nodes=20), engine), key)
    row = Inbox(engine).get(key)
    assert row is not None and (row.status, row.attempts) == (Status.DEAD, 1)


def test_duplicate_tick_in_the_same_slot_runs_once(
    client: FlaskClient, engine: Engine, clock: Clock
) -> None:
    first = post(client, tick_body("effect", publish_time=clock.now))[1]
    second = post(client, tick_body("effect", publish_time=clock.now + timedelta(seconds=30)))[1]
    assert (first["outcome"], second["outcome"]) == ("done", "duplicate")
    clock.now += timedelta(seconds=60)  # the next slot has begun (a tick ahead of it is refused)
    later = post(client, tick_body("effect", publish_time=clock.now))[1]
    assert later["outcome"] == "done"
    assert len(effect_rows(engine)) == 2


def test_backlog_of_old_ticks_is_coalesced(
    client: FlaskClient, engine: Engine, clock: Clock
) -> None:
    """Ticks piled up during an outage arrive at once: only the current slots run."""
    slots = [clock.now - timedelta(minutes=minutes) for minutes in range(10, -1, -1)]
    outcomes = [
        post(client, tick_body("effect", publish_time=slot))[1]["outcome"] for slot in slots
    ]
    assert outcomes.count("done") == 2  # the current slot and the previous one (2 periods)
    assert outcomes.count("skipped") == 9
    assert len(effect_rows(engine)) == 2


def test_tick_older_than_the_last_completed_slot_is_stale(
    client: FlaskClient, engine: Engine, clock: Clock
) -> None:
    assert post(client, tick_body("effect", publish_time=clock.now))[1]["outcome"] == "done"
    late = post(client, tick_body("effect", publish_time=clock.now - timedelta(seconds=61)))[1]
    assert (late["outcome"], "precedes completed slot" in late["reason"]) == ("skipped", True)


def test_tick_from_the_future_is_skipped_and_does_not_block_later_ticks(
    client: FlaskClient, engine: Engine, clock: Clock
) -> None:
    future = post(client, tick_body("effect", publish_time=clock.now + timedelta(days=3)))[1]
    assert (future["outcome"], "in the future" in future["reason"]) == ("skipped", True)
    assert post(client, tick_body("effect", publish_time=clock.now))[1]["outcome"] == "done"
    assert len(effect_rows(engine)) == 1


def test_unknown_tick_task_is_unroutable(client: FlaskClient, clock: Clock) -> None:
    answer = post(client, tick_body("no-such-task", publish_time=clock.now))[1]
    assert answer["outcome"] == "unroutable"


def test_cleanup_purges_finished_rows_past_retention(
    engine: Engine, clock: Clock, settings: Settings
) -> None:
    app = create_app(Service(settings, build_registry(settings), engine), clock=clock)
    client = app.test_client()
    post(client, wrapped_body(message_id="old"))  # unroutable, finished "now" by the app clock
    inbox = Inbox(engine)
    assert inbox.purge(finished_before=clock.now - timedelta(seconds=1)) == 0
    assert inbox.purge(finished_before=clock.now + timedelta(seconds=1)) == 1


def test_an_unroutable_tick_names_its_task_and_the_registered_ones(
    client: FlaskClient, engine: Engine, clock: Clock
) -> None:
    status, answer = post(client, tick_body("no-such-task", publish_time=clock.now))
    assert (status, answer["outcome"]) == (200, "unroutable")
    assert "'no-such-task'" in answer["error"] and "effect" in answer["error"]
    assert "sweep" in answer["error"] and "cleanup" in answer["error"]
    row = Inbox(engine).get(answer["key"])
    assert row is not None and row.error == answer["error"]
