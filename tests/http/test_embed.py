"""The consumer mounted in another team's Flask app (``consumer.http.embed``): the golden push
formats reach the same keys as in the service's own app, the gate refuses the mounted routes'
bad requests before their body, and the host's routes, auth and error pages are its own."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from flask import Flask
from sqlalchemy import Engine

from consumer.auth.signature import signed_headers
from consumer.config.settings import Settings
from consumer.http.app import create_app
from consumer.http.embed import Consumer
from consumer.inbox.store import Inbox
from consumer.service import Service
from tests.conftest import Clock
from tests.http.conftest import SECRET
from tests.http.host import PREFIX, TEAM_KEY, host_app
from tests.wire.test_golden_formats import CASES, load_case

TOKEN = "push-token-0123456789abcdef"


@pytest.fixture(params=["standalone", "embedded"])
def mounted(
    request: pytest.FixtureRequest, settings: Settings, engine: Engine, clock: Clock
) -> tuple[Flask, str]:
    """The service's own app at ``/``, or the host app with the consumer under ``/consumer``."""
    service = Service.of(settings.with_values(tick_hook_secrets=(SECRET,)), engine)
    if request.param == "standalone":
        return create_app(service, clock=clock), ""
    return host_app(service, clock), PREFIX


@pytest.mark.parametrize("name", CASES)
def test_golden_formats_reach_the_same_keys(
    mounted: tuple[Flask, str], engine: Engine, name: str
) -> None:
    app, prefix = mounted
    headers, body, expected = load_case(name)
    response = app.test_client().post(f"{prefix}/push", data=body, headers=headers)
    assert response.status_code == 200, response.json
    assert (response.json or {})["key"] == expected["key"]
    (row,) = Inbox(engine).list()
    assert (row.key, row.route, row.message["format"]) == (
        expected["key"], expected["route"], expected["format"],
    )  # fmt: skip


def test_a_redelivery_is_a_duplicate_and_a_tick_joins_the_slot(
    mounted: tuple[Flask, str],
) -> None:
    app, prefix = mounted
    headers, body, _ = load_case(CASES[0])
    client = app.test_client()
    outcomes = [client.post(f"{prefix}/push", data=body, headers=headers).json for _ in "ab"]
    assert [o["outcome"] for o in outcomes if o][1] == "duplicate"
    tick = json.dumps({"task": "sweep"}).encode()
    signed = signed_headers(SECRET, int(Clock()().timestamp()), tick)
    answers = [client.post(f"{prefix}/ticks/sweep", data=tick, headers=signed) for _ in "ab"]
    assert [(a.status_code, a.json["outcome"]) for a in answers] == [  # type: ignore[index]
        (200, "done"), (200, "duplicate"),
    ]  # fmt: skip


@pytest.fixture
def guarded(settings: Settings, engine: Engine) -> Iterator[Flask]:
    """A host app whose consumer authenticates pushes (a shared token) and takes 1 KiB bodies."""
    changed = settings.with_values(local_mode=False, push_token=TOKEN, max_body_bytes=1024)
    yield host_app(Service.of(changed, engine))


def test_the_hosts_routes_auth_and_error_pages_are_its_own(guarded: Flask) -> None:
    client = guarded.test_client()
    assert client.get("/hello").get_data(as_text=True) == "hello from the team"
    big = b"x" * 5000  # over the consumer's limit: not the consumer's business here
    headers = {"X-Team-Key": TEAM_KEY}
    assert client.post("/upload", data=big, headers=headers).get_data() == b"stored 5000 bytes"
    refused = client.post("/upload", data=big)
    assert (refused.status_code, refused.get_data()) == (401, b"<h1>team error 401</h1>")
    missing = client.get("/nowhere")
    assert (missing.status_code, missing.mimetype) == (404, "text/html")


def test_the_mounted_routes_are_gated_before_their_body(guarded: Flask) -> None:
    client = guarded.test_client()
    unauthenticated = client.post(f"{PREFIX}/push", json={"message": {}})
    assert unauthenticated.status_code == 401 and unauthenticated.json == {
        "outcome": "rejected", "error": "missing or invalid token", "key": "",
    }  # fmt: skip
    big = client.post(f"{PREFIX}/push?token={TOKEN}", data=b"x" * 5000)
    assert big.status_code == 413 and big.mimetype == "application/json"
    bad = client.post(f"{PREFIX}/push?token={TOKEN}", data=b"{not json")
    assert bad.status_code == 400 and "not valid JSON" in bad.json["error"]  # type: ignore[index]
    ticks = client.post(f"{PREFIX}/ticks/sweep", json={"task": "sweep"})
    assert ticks.status_code == 401 and "disabled" in ticks.json["error"]  # type: ignore[index]


def test_mounting_twice_is_refused(settings: Settings, engine: Engine) -> None:
    app = host_app(Service.of(settings, engine))
    with pytest.raises(RuntimeError, match="already mounted"):
        Consumer(app, Service.of(settings, engine))
