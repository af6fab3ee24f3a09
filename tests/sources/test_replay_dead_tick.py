"""Tried as a new user would: a tick task served by an HTTP target that answers 422 goes
``dead``; once the target is fixed, ``consumer inbox replay KEY`` (the real command, in a
subprocess, on a real database) runs the target once under the tick's own slot, whatever slots
completed since and however old the slot is. So does a tick left ``failed`` (a 503 whose
redeliveries Pub/Sub gave up on) and one ``unroutable`` (its task declared only afterwards)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from bench.support.target_servers import PyTarget, Reply
from consumer.config.settings import Settings
from consumer.http.app import create_app
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.service import Service
from consumer.wire.envelopes_out import tick_body
from tests.conftest import Clock, server_env

TASK, PERIOD = "process-pending", 60


@pytest.fixture
def target() -> Iterator[PyTarget]:
    with PyTarget().running() as target:
        yield target


def target_env(database_url: str, target: PyTarget | None) -> dict[str, str]:
    """The settings with the target serving the task (``None``: no target, no such task)."""
    declared = [{"name": "orders", "url": f"{target.url}/tasks", "auth": {"type": "none"},
                 "serves": {"tick": TASK, "period_seconds": PERIOD}}] if target else []  # fmt: skip
    return {"CONSUMER_DATABASE_URL": database_url, "CONSUMER_LOCAL_MODE": "true",
            "CONSUMER_HTTP_TARGETS": json.dumps(declared)}  # fmt: skip


def replay(env: dict[str, str], key: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "consumer", "inbox", "replay", key]
    return subprocess.run(command, env=server_env(env), capture_output=True, text=True, timeout=60)


def test_a_dead_tick_replayed_runs_its_target_once_under_its_slot(
    database_url: str, engine: Engine, target: PyTarget
) -> None:
    env = target_env(database_url, target)
    clock = Clock(Clock()() - timedelta(hours=1))  # the ticks came an hour ago
    client = create_app(Service.of(Settings.from_env(env), engine), clock=clock).test_client()
    refused = Reply(422, b'{"error": "bad input"}')
    target.replies = [refused, Reply(200), refused, Reply(200)]
    dead = client.post("/push", json=tick_body(TASK, publish_time=clock.now)).get_json()
    assert dead["outcome"] == "dead" and "422" in dead["error"]
    clock.advance(PERIOD)  # the next slot completes: the dead one now precedes it
    assert client.post("/push", json=tick_body(TASK, publish_time=clock.now)).json["outcome"] == (
        "done"
    )
    assert len(target.received) == 2

    still_dead = replay(env, dead["key"])  # the target still refuses: said by the exit status
    assert json.loads(still_dead.stdout)["outcome"] == "dead", still_dead.stdout
    assert still_dead.returncode == 1
    done = replay(env, dead["key"])  # fixed now
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["outcome"] == "done", done.stdout
    key = f'"{dead["key"]}"'
    assert [call.headers["Idempotency-Key"] for call in target.received[2:]] == [key, key]
    row = Inbox(engine).get(dead["key"])
    assert row is not None and row.status is Status.DONE
    again = replay(env, dead["key"])  # done is not replayable: the target is not called again
    assert again.returncode == 1 and "not dead, unroutable or failed" in again.stderr
    assert len(target.received) == 4


def test_a_failed_tick_replayed_runs_under_its_slot(
    database_url: str, engine: Engine, target: PyTarget
) -> None:
    env = target_env(database_url, target)
    clock = Clock(Clock()() - timedelta(hours=1))
    client = create_app(Service.of(Settings.from_env(env), engine), clock=clock).test_client()
    target.replies = [Reply(503, b'{"error": "busy"}'), Reply(200)]
    failed = client.post("/push", json=tick_body(TASK, publish_time=clock.now))
    assert failed.status_code == 503 and failed.json["outcome"] == "retry"
    key = failed.json["key"]  # and Pub/Sub gave up redelivering it
    assert_replayed_under_its_slot(env, engine, client, clock, target, key, Status.FAILED)


def test_an_unroutable_tick_replayed_runs_once_its_task_is_declared(
    database_url: str, engine: Engine, target: PyTarget
) -> None:
    clock = Clock(Clock()() - timedelta(hours=1))
    bare = Settings.from_env(target_env(database_url, None))
    unknown = create_app(Service.of(bare, engine), clock=clock).test_client()
    unroutable = unknown.post("/push", json=tick_body(TASK, publish_time=clock.now)).json
    assert unroutable["outcome"] == "unroutable", unroutable
    env = target_env(database_url, target)  # the target is declared: the task exists now
    client = create_app(Service.of(Settings.from_env(env), engine), clock=clock).test_client()
    key = unroutable["key"]
    assert_replayed_under_its_slot(env, engine, client, clock, target, key, Status.UNROUTABLE)


def assert_replayed_under_its_slot(
    env: dict[str, str],
    engine: Engine,
    client: FlaskClient,
    clock: Clock,
    target: PyTarget,
    key: str,
    status: Status,
) -> None:
    """``key``'s row is left ``status``; the next slot completes; the replay runs the target
    once under ``key``'s own slot, and a second replay does nothing."""
    row = Inbox(engine).get(key)
    assert row is not None and row.status is status
    clock.advance(PERIOD)
    assert client.post("/push", json=tick_body(TASK, publish_time=clock.now)).json["outcome"] == (
        "done"
    )
    calls = len(target.received)
    done = replay(env, key)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["outcome"] == "done", done.stdout
    (call,) = target.received[calls:]
    assert call.headers["Idempotency-Key"] == f'"{key}"' and call.headers["ce-id"] == key
    row = Inbox(engine).get(key)
    assert row is not None and row.status is Status.DONE
    again = replay(env, key)
    assert again.returncode == 1 and len(target.received) == calls + 1
