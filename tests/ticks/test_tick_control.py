"""Pause, resume, run now, the overlap policies and the catch-up policies, each through real push
deliveries to the Flask app on SQLite and PostgreSQL, with what was recorded asserted: the
answers, the inbox rows and the task's completed slot. "Another pod's run still going" is what
it is in the database: a claim of its key with a live lease, holding the task, both made by the
inbox itself (``tests/ticks/test_overlap_gunicorn.py`` has real runs in real processes)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.errors import SettingsError
from consumer.inbox.model import Claim, Status
from consumer.inbox.store import Inbox
from consumer.pipeline.registry import Registry
from consumer.service import Service
from consumer.ticks import controls as tasks
from consumer.ticks.pauses import TickControl
from consumer.ticks.store import TickStore
from consumer.wire.envelopes_out import wrapped_body
from consumer.wire.message import PushMessage
from tests.conftest import Clock

START = datetime(2026, 1, 5, 9, 0, 30, tzinfo=UTC)
PERIOD = 60
PLUGIN = "tests.ticks.plugin"
pytestmark = pytest.mark.clock(START)


def slot(minutes: int) -> datetime:
    """The slot ``minutes`` after 09:00 (``report`` runs every minute)."""
    return START.replace(second=0) + timedelta(minutes=minutes)


def key(minutes: int, kind: str = "") -> str:
    return f"tick:report:{kind}{slot(minutes).isoformat()}"


@pytest.fixture
def policies() -> dict[str, dict[str, str]]:
    """``CONSUMER_TICK_POLICIES`` of the app (a test overrides it with ``with_policies``)."""
    return {}


def with_policies(overlap: str = "allow", catch_up: str = "latest") -> pytest.MarkDecorator:
    chosen = {"report": {"overlap": overlap, "catch_up": catch_up}}
    return pytest.mark.parametrize("policies", [chosen], ids=[f"{overlap}-{catch_up}"])


@pytest.fixture
def app_settings(settings: Settings, policies: dict[str, dict[str, str]]) -> Settings:
    return settings.with_values(plugins=(PLUGIN,), tick_policies=policies)


def push(client: FlaskClient, at: datetime, **attributes: str) -> tuple[int, dict[str, Any]]:
    """A Pub/Sub push of a ``report`` tick published at ``at``."""
    body = wrapped_body(attributes={"task": "report", **attributes}, publish_time=at)
    response = client.post("/push", json=body)
    return response.status_code, response.json or {}


def another_pods_run(engine: Engine, minutes: int, clock: Clock) -> Claim:
    """What a delivery on another pod holds while its run of that slot goes on: the claim of
    its key, and the task."""
    message = PushMessage("elsewhere", slot(minutes), attributes={"task": "report"})
    inbox = Inbox(engine)
    claim = inbox.claim(key(minutes), "tick", message, clock(), timedelta(seconds=70))
    assert claim is not None
    assert TickStore(engine).take_run("report", claim.key, claim.lease_until, clock())
    return claim


def finished(engine: Engine, claim: Claim, clock: Clock) -> None:
    """The other pod's run ends: recorded done, and it lets go of the task."""
    Inbox(engine).finish(claim, Status.DONE, clock())
    TickStore(engine).release_run("report", claim.key)


def row(engine: Engine, row_key: str) -> Any:
    return Inbox(engine).get(row_key)


def test_a_paused_task_records_its_ticks_skipped_until_it_is_resumed(
    client: FlaskClient, engine: Engine, app_settings: Settings, clock: Clock
) -> None:
    service = Service.of(app_settings, engine)
    assert tasks.pause(service, "report", "alice", "the relay is down") == "report is paused"
    assert tasks.pause(service, "report", "bob") == "report was paused already"
    status, body = push(client, START)
    assert (status, body["outcome"], body["reason"], body["paused_by"]) == (
        200, "skipped", "paused", "alice",
    )  # fmt: skip
    recorded = row(engine, key(0))
    assert recorded.status is Status.SKIPPED and recorded.result["reason"] == "paused"
    assert TickStore(engine).last_slot("report") is None  # a skipped slot completes nothing
    assert push(client, START)[1]["outcome"] == "duplicate"  # its redelivery stays skipped
    assert tasks.resume(service, "report", "alice") == "report is resumed"
    assert tasks.resume(service, "report", "alice") == "report was not paused"
    clock.advance(PERIOD)
    status, body = push(client, START + timedelta(seconds=PERIOD))
    assert (status, body["outcome"], body["key"]) == (200, "done", key(1))
    assert TickStore(engine).last_slot("report") == slot(1)


def test_a_pause_is_a_gauge_with_its_time(
    client: FlaskClient, engine: Engine, app_settings: Settings, clock: Clock
) -> None:
    tasks.pause(Service.of(app_settings, engine), "report", "alice")
    paused_at = TickControl(engine).all_paused()[0].paused_at
    text = client.get("/metrics").get_data(as_text=True)
    samples = [line.split() for line in text.splitlines() if line.startswith("consumer_task_")]
    assert [name for name, _ in samples] == ['consumer_task_paused{task="report"}']
    assert float(samples[0][1]) == pytest.approx(paused_at.timestamp(), abs=1e-3)


def test_run_now_has_a_key_of_its_own_and_each_run_runs_once(
    client: FlaskClient, engine: Engine, app_settings: Settings
) -> None:
    assert push(client, START)[1]["outcome"] == "done"  # the slot's own run
    first = push(client, START, run_now="r1")
    again = push(client, START, run_now="r1")  # a redelivery of the same run now
    other = push(client, START, run_now="r2")  # another click
    assert (first[0], first[1]["outcome"], first[1]["key"]) == (
        200, "done", "tick:report:run-now:r1",
    )  # fmt: skip
    assert (again[1]["outcome"], other[1]["outcome"]) == ("duplicate", "done")
    assert row(engine, "tick:report:run-now:r1").result["run_now"] == "r1"
    assert TickStore(engine).last_slot("report") == slot(0)  # a run now completes no slot
    outcome = tasks.run_now(Service.of(app_settings, engine), "report", "alice", "r1")
    assert outcome.kind.value == "duplicate"  # the CLI's and the push's run-now are one key
    TickStore(engine).advance_slot("report", slot(5), "60")
    assert push(client, START, run_now="r3")[1]["outcome"] == "done"  # a run now is never stale


def test_a_paused_task_skips_its_run_now_too(
    client: FlaskClient, engine: Engine, app_settings: Settings
) -> None:
    tasks.pause(Service.of(app_settings, engine), "report", "alice")
    status, body = push(client, START, run_now="r1")
    assert (status, body["outcome"], body["reason"]) == (200, "skipped", "paused")


def test_overlap_allow_is_the_default_two_slots_run_at_once(
    client: FlaskClient, engine: Engine, clock: Clock
) -> None:
    another_pods_run(engine, 0, clock)
    clock.advance(PERIOD)
    assert push(client, START + timedelta(seconds=PERIOD))[1]["outcome"] == "done"


@with_policies(overlap="skip")
def test_overlap_skip_records_the_next_slot_skipped_while_a_run_goes_on(
    client: FlaskClient, engine: Engine, clock: Clock
) -> None:
    running = another_pods_run(engine, 0, clock)
    clock.advance(PERIOD)
    status, body = push(client, START + timedelta(seconds=PERIOD))
    assert (status, body["outcome"]) == (200, "skipped")  # acknowledged: not redelivered
    assert body["reason"] == f"overlap: {key(0)} is still running"
    assert row(engine, key(1)).status is Status.SKIPPED
    assert push(client, START, run_now="r1")[1]["outcome"] == "skipped"  # a run now yields too
    finished(engine, running, clock)
    clock.advance(PERIOD)
    assert push(client, START + timedelta(seconds=2 * PERIOD))[1]["outcome"] == "done"


@with_policies(overlap="skip")
def test_overlap_skip_ignores_a_run_whose_lease_ran_out(
    client: FlaskClient, engine: Engine, clock: Clock
) -> None:
    another_pods_run(engine, 0, clock)  # its pod died: nobody renews the lease
    clock.advance(PERIOD + 30)
    assert push(client, START + timedelta(seconds=PERIOD))[1]["outcome"] == "done"


@with_policies(overlap="wait")
def test_overlap_wait_answers_a_retry_and_records_nothing_until_the_run_ends(
    client: FlaskClient, engine: Engine, clock: Clock
) -> None:
    running = another_pods_run(engine, 0, clock)
    clock.advance(PERIOD)
    status, body = push(client, START + timedelta(seconds=PERIOD))
    assert (status, body["outcome"], body["waiting_for"]) == (429, "in-progress", key(0))
    assert row(engine, key(1)) is None  # nothing written: the retry claims it afresh
    status, body = push(client, START + timedelta(seconds=PERIOD), run_now="r1")
    assert status == 429 and row(engine, "tick:report:run-now:r1") is None
    finished(engine, running, clock)
    status, body = push(client, START + timedelta(seconds=PERIOD))  # Pub/Sub's redelivery
    assert (status, body["outcome"], body["attempt"]) == (200, "done", 1)


def outage(client: FlaskClient, engine: Engine, clock: Clock, minutes: int) -> None:
    """Slot 0 completes, then nothing arrives for ``minutes`` minutes."""
    assert push(client, START)[1]["outcome"] == "done"
    clock.advance(minutes * PERIOD)


def test_catch_up_latest_runs_the_current_slots_only(
    client: FlaskClient, engine: Engine, clock: Clock
) -> None:
    outage(client, engine, clock, 10)
    backlog = push(client, START + timedelta(minutes=4))  # Pub/Sub kept the missed ticks
    current = push(client, START + timedelta(minutes=10))
    assert backlog[1]["outcome"] == "skipped" and "older than" in backlog[1]["reason"]
    assert current[1]["outcome"] == "done" and "caught_up" not in current[1]
    assert TickStore(engine).last_slot("report") == slot(10)


@with_policies(catch_up="once")
def test_catch_up_once_runs_one_run_for_every_missed_slot(
    client: FlaskClient, engine: Engine, clock: Clock
) -> None:
    outage(client, engine, clock, 10)
    status, body = push(client, START + timedelta(minutes=10))
    # Slots 9 and 10 are current (CONSUMER_TICK_MAX_AGE_PERIODS=2); 1 to 8 were missed.
    assert (status, body["outcome"], body["caught_up"]) == (
        200, "done", {slot(8).isoformat(): "done"},
    )  # fmt: skip
    caught = row(engine, key(8, "catch-up:"))
    assert caught.status is Status.DONE
    assert caught.result["catch_up"] == {
        "mode": "once", "first": slot(1).isoformat(), "last": slot(8).isoformat(),
    }  # fmt: skip
    assert TickStore(engine).last_slot("report") == slot(10)
    late = push(client, START + timedelta(minutes=9))  # slot 9's own tick still runs
    assert late[1]["outcome"] == "skipped"  # ... but it precedes the completed slot 10
    again = push(client, START + timedelta(minutes=10), run_now="r1")
    assert "caught_up" not in again[1]  # nothing is missed any more


@with_policies(catch_up="all:3")
def test_catch_up_all_runs_each_missed_slot_up_to_n_oldest_first(
    client: FlaskClient, engine: Engine, clock: Clock
) -> None:
    outage(client, engine, clock, 10)
    backlog = push(client, START + timedelta(minutes=7))  # stale: its catch-up run is apart
    status, body = push(client, START + timedelta(minutes=10))
    assert backlog[1]["outcome"] == "skipped"
    assert (status, body["outcome"]) == (200, "done")
    assert body["caught_up"] == {slot(m).isoformat(): "done" for m in (6, 7, 8)}
    assert list(body["caught_up"]) == [slot(m).isoformat() for m in (6, 7, 8)]
    for minutes in (6, 7, 8):
        recorded = row(engine, key(minutes, "catch-up:"))
        assert recorded.status is Status.DONE
        assert recorded.result["slot"] == slot(minutes).isoformat()
    assert row(engine, key(5, "catch-up:")) is None  # beyond N
    assert TickStore(engine).last_slot("report") == slot(10)
    duplicate = push(client, START + timedelta(minutes=10))
    assert duplicate[1]["outcome"] == "duplicate"


@with_policies(catch_up="all:3")
def test_a_catch_up_run_taken_by_another_delivery_runs_once(
    client: FlaskClient, engine: Engine, clock: Clock
) -> None:
    outage(client, engine, clock, 10)
    message = PushMessage("elsewhere", slot(10), attributes={"task": "report"})
    held = Inbox(engine).claim(key(7, "catch-up:"), "tick", message, clock(), timedelta(60))
    assert held is not None  # the previous slot's delivery, on another pod, catches up too
    body = push(client, START + timedelta(minutes=10))[1]
    assert body["caught_up"] == {
        slot(6).isoformat(): "done", slot(7).isoformat(): "taken", slot(8).isoformat(): "done",
    }  # fmt: skip


def test_policies_are_declared_and_overridden_with_one_line_errors() -> None:
    registry = Registry()
    registry.tick("nightly", period_seconds=60, overlap="wait", catch_up="all:4")(lambda c, e: {})
    policy = registry.policy_of("nightly", {})
    assert (policy.overlap.value, str(policy.catch_up)) == ("wait", "all:4")
    overridden = registry.policy_of("nightly", {"nightly": {"catch_up": "once"}})
    assert (overridden.overlap.value, str(overridden.catch_up)) == ("wait", "once")
    with pytest.raises(SettingsError, match="tick task 'x': overlap must be allow, skip or wait"):
        registry.tick("x", period_seconds=60, overlap="sometimes")
    env = {"CONSUMER_LOCAL_MODE": "true"}
    for raw, problem in (
        ("report.overlap=never", "task 'report': overlap must be allow, skip or wait"),
        ("report.catch_up=all", "catch-up all needs a count"),
        ("report.catch_up=all:0", "N in 1..1000"),
        ("report=skip", "expected TASK.overlap=, TASK.catch_up= or TASK.jitter="),
    ):
        with pytest.raises(SettingsError, match=problem) as raised:
            Settings.from_env({**env, "CONSUMER_TICK_POLICIES": raw})
        assert str(raised.value).startswith("CONSUMER_TICK_POLICIES: ")
        assert "\n" not in str(raised.value)
    chosen = Settings.from_env({**env, "CONSUMER_TICK_POLICIES": "a.b.overlap=skip"})
    assert chosen.tick_control.policies == {"a.b": {"overlap": "skip"}}
