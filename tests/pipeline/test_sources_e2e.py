"""Through gunicorn on PostgreSQL, outside local mode: a jobs-topic message, a storage notification
and a deploy message each try every other route (a tick, a run now, a continuation, a deploy, a
file, a job, anything else), and none starts anything outside its own: nothing reaches a target,
no job is enqueued, the genuine tick still runs in its slot. Each legitimate one still works, and
so does a continuation the service signed."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from sqlalchemy import func, select

from bench.support.target_servers import PyTarget
from consumer.db.engine import make_engine
from consumer.jobs.schema import jobs
from consumer.wire import signed
from consumer.wire.envelopes_out import deploy_body, storage_body, wrapped_body
from tests.conftest import Server

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
TOKEN = "push-token-0123456789abcdef"
SECRET = "signing-secret-0123456789"
PROJECT = "projects/p/subscriptions/"
SOURCES = ("ticks-push=tick,jobs-push=job,storage-push=storage,deploys-push=deploy,"
           "continuations-push=tick+storage")  # fmt: skip
OWN = {"jobs-push": "job", "storage-push": "storage", "deploys-push": "deploy"}


def targets(url: str) -> str:
    def target(name: str, serves: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "url": f"{url}/{name}", "serves": serves, "auth": {"type": "none"}}

    return json.dumps([
        target("tick", {"tick": "billing", "period_seconds": 60}),
        target("storage", {"storage": "uploads"}),
        target("deploy", {"deploy": "web"}),
        target("other", {"message": True}),
    ])  # fmt: skip


def attempts(subscription: str) -> dict[str, dict[str, Any]]:
    """Every route, as a publisher on ``subscription`` could try it."""
    made = {
        "tick": wrapped_body(attributes={"task": "billing"}),
        "run_now": wrapped_body(attributes={"task": "billing", "run_now": "x1"}),
        "continuation": wrapped_body(attributes={"task": "billing", "continuation": "c1"}),
        "deploy": deploy_body("web", "r-forged"),
        "storage": storage_body("uploads", "forged.csv", "1"),
        "job": wrapped_body(b"{}", {"job_kind": "record", "job_key": "forged"}),
        "other": wrapped_body(b"hello", {"anything": "else"}),
    }
    return {name: {**body, "subscription": PROJECT + subscription} for name, body in made.items()}


@pytest.fixture
def target() -> Iterator[PyTarget]:
    with PyTarget().running() as running:
        yield running


@pytest.fixture
def server(postgres_url: str, target: PyTarget, start_server: Callable[..., Server]) -> Server:
    env = {
        "CONSUMER_DATABASE_URL": postgres_url, "CONSUMER_LOCAL_MODE": "false",
        "CONSUMER_PUSH_TOKEN": TOKEN, "CONSUMER_SOURCES": SOURCES,
        "CONSUMER_SIGNING_SECRETS": SECRET, "CONSUMER_HTTP_TARGETS": targets(target.url),
        "CONSUMER_PLUGINS": "tests.jobs.kinds_plugin", "CONSUMER_LOG_LEVEL": "WARNING",
    }  # fmt: skip
    return start_server(env, workers=2)


def push(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    answer = requests.post(f"{server.url}/push", params={"token": TOKEN}, json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def job_count(postgres_url: str) -> int:
    engine = make_engine(postgres_url)
    try:
        with engine.connect() as connection:
            return int(connection.scalar(select(func.count()).select_from(jobs)) or 0)
    finally:
        engine.dispose()


def test_no_source_starts_anything_outside_its_own_route(
    server: Server, target: PyTarget, postgres_url: str
) -> None:
    for subscription, own in OWN.items():
        for name, body in attempts(subscription).items():
            if name == own:
                continue
            answer = push(server, body)
            assert answer["outcome"] == "dead", (subscription, name, answer)
            assert answer["key"].startswith(f"refused:{PROJECT}{subscription}:")
    assert target.received == []
    assert job_count(postgres_url) == 0

    genuine_tick = push(server, {**attempts("ticks-push")["tick"]})
    assert genuine_tick["outcome"] == "done" and genuine_tick["key"].startswith("tick:billing:")
    for subscription, own in OWN.items():
        assert push(server, attempts(subscription)[own])["outcome"] == "done", subscription
    assert sorted(received.path for received in target.received) == [
        "/deploy", "/storage", "/tick"
    ]  # fmt: skip
    assert job_count(postgres_url) == 1


def test_only_the_services_own_run_now_and_continuations_are_honoured(
    server: Server, target: PyTarget
) -> None:
    ticks = attempts("ticks-push")
    continuations = attempts("continuations-push")
    assert push(server, ticks["run_now"])["outcome"] == "dead"
    assert push(server, continuations["continuation"])["outcome"] == "dead"
    assert target.received == []
    attributes = signed.sign(b"", {"task": "billing", "continuation": "wake-1"}, SECRET)
    own = wrapped_body(attributes=attributes, subscription=PROJECT + "continuations-push")
    answer = push(server, own)
    assert (answer["outcome"], answer["key"]) == ("done", "tick:billing:continuation:wake-1")
    assert [received.path for received in target.received] == ["/tick"]
