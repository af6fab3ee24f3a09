"""Jitter of tick tasks: a task's run of a slot starts at an offset inside its window, from a
hash of the task and the slot (the same in every process, whichever scheduler sent the tick),
through real push deliveries to the Flask app on SQLite and PostgreSQL; a window that does not
parse or is longer than the period stops the start in one line."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.errors import SettingsError
from consumer.inbox.store import Inbox
from consumer.pipeline.registry import Registry
from consumer.wire import jitter
from consumer.wire.envelopes_out import wrapped_body
from tests.conftest import Clock

START = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC)
WINDOW = 50.0
pytestmark = pytest.mark.clock(START)


@pytest.fixture
def app_settings(settings: Settings, request: pytest.FixtureRequest) -> Settings:
    policies = getattr(request, "param", {"report": {"jitter": f"{WINDOW:g}s"}})
    return settings.with_values(plugins=("tests.ticks.plugin",), tick_policies=policies)


def push(client: FlaskClient, at: datetime, **attributes: str) -> tuple[int, dict[str, Any]]:
    body = wrapped_body(attributes={"task": "report", **attributes}, publish_time=at)
    response = client.post("/push", json=body)
    return response.status_code, response.json or {}


def test_the_offset_is_inside_the_window_stable_and_spread() -> None:
    slots = [START + timedelta(minutes=n) for n in range(1000)]
    offsets = [jitter.offset("report", slot, WINDOW) for slot in slots]
    assert all(0 <= offset < WINDOW for offset in offsets)
    assert offsets == [jitter.offset("report", slot, WINDOW) for slot in slots]
    assert len(set(offsets)) == len(offsets)
    assert abs(statistics.mean(offsets) - WINDOW / 2) < WINDOW * 0.05
    assert jitter.offset("other", slots[0], WINDOW) != offsets[0]
    code = f"from consumer.wire import jitter; from datetime import datetime; print(repr(\
jitter.offset('report', datetime.fromisoformat('{slots[7].isoformat()}'), {WINDOW})))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={"PYTHONHASHSEED": "123"}, check=True)  # fmt: skip
    assert float(other.stdout) == offsets[7], "another process computed another offset"


def late_slot(budget: float) -> datetime:
    """A slot whose offset is further ahead than a delivery may wait for."""
    for n in range(100):
        slot = START + timedelta(minutes=n)
        if jitter.offset("report", slot, WINDOW) > budget / 2 + 2:
            return slot
    raise AssertionError("no slot with a late offset")


def test_a_slot_runs_at_its_offset_whenever_its_tick_arrives(
    client: FlaskClient, engine: Engine, app_settings: Settings, clock: Clock
) -> None:
    slot = late_slot(app_settings.handler_budget_seconds)
    start = jitter.start_of("report", slot, WINDOW)
    clock.now = slot + timedelta(seconds=1)  # the scheduler's tick, on time: too early to wait
    status, body = push(client, slot)
    assert (status, body["waiting_for"], body["starts_at"]) == (429, "jitter", start.isoformat())
    key = f"tick:report:{slot.isoformat()}"
    assert Inbox(engine).get(key) is None, "a tick waiting for its offset recorded something"
    clock.now = start - timedelta(seconds=0.4)  # its redelivery: waits in the delivery
    began = time.monotonic()
    status, body = push(client, slot)
    waited = time.monotonic() - began
    assert (status, body["outcome"], body["key"]) == (200, "done", key)
    assert 0.3 <= waited < 2, f"the run did not wait for its offset ({waited:.2f} s)"
    clock.now = start + timedelta(seconds=5)  # another scheduler's copy: the same slot, done
    assert push(client, slot)[1]["outcome"] == "duplicate"


def test_a_run_now_is_not_jittered(
    client: FlaskClient, app_settings: Settings, clock: Clock
) -> None:
    slot = late_slot(app_settings.handler_budget_seconds)
    clock.now = slot
    status, body = push(client, slot, run_now="r1")
    assert (status, body["outcome"]) == (200, "done")


@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        ({"jitter": "61s"}, "tick task 'x': a jitter of 61 s is longer than the period 60 s"),
        ({"jitter": "soon"}, "tick task 'x': jitter must be a duration such as 30s or 5m"),
    ],
)
def test_a_bad_jitter_is_refused_in_one_line(declared: dict[str, str], problem: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Registry().tick("x", 60, **declared)
    assert str(caught.value).startswith(problem) and "\n" not in str(caught.value)


def test_a_bad_jitter_in_the_settings_is_refused_in_one_line() -> None:
    raw = {"CONSUMER_LOCAL_MODE": "true", "CONSUMER_TICK_POLICIES": "report.jitter=later"}
    with pytest.raises(Exception, match="task 'report': jitter must be a duration") as caught:
        Settings.from_env(raw)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "app_settings", [{"report": {"jitter": "500s"}}], indirect=True, ids=["jitter-500s"]
)
def test_a_window_from_the_settings_never_reaches_past_the_next_slot(
    client: FlaskClient, clock: Clock
) -> None:
    slot = next(START + timedelta(minutes=n) for n in range(100)
                if jitter.offset("report", START + timedelta(minutes=n), 500) > 100)  # fmt: skip
    clock.now = slot + timedelta(seconds=59.99)  # the period is 60 s
    status, body = push(client, slot)
    assert (status, body["outcome"]) == (200, "done"), body
