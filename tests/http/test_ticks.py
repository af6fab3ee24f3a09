"""``POST /ticks/<task>`` through the Flask app: a signed or OIDC tick joins the push path's
slots (one run per slot, whichever way it came), the stale and future rules apply, and anything
unauthenticated or malformed is refused before a row is written."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from consumer.auth.signature import signed_headers
from consumer.config.settings import Settings
from consumer.http.app import create_app
from consumer.inbox.store import Inbox
from consumer.service import Service
from consumer.wire.envelopes_out import wrapped_body
from tests.auth.tokens import CertsServer, SigningKey, claims
from tests.conftest import Clock
from tests.http.conftest import OLD_SECRET, SCHEDULER, SECRET, TICK_AUDIENCE

START = datetime(2026, 1, 5, 9, 4, 50, tzinfo=UTC)
SLOT = "2026-01-05T09:00:00+00:00"  # sweep: every 300 s
NOPE = "tick:nope:2026-01-05T09:04:00+00:00"
pytestmark = pytest.mark.clock(START)


@pytest.fixture
def app_settings(settings: Settings, certs_server: CertsServer) -> Settings:
    return settings.with_values(
        tick_hook_secrets=(SECRET, OLD_SECRET),
        tick_hook_audience=TICK_AUDIENCE,
        tick_hook_service_accounts=(SCHEDULER,),
        oidc_certs_url=certs_server.url,
    )


def signed(
    client: FlaskClient, task: str = "sweep", at: datetime | None = None, **options: Any
) -> tuple[int, dict[str, Any]]:
    """A tick signed as a CronJob with curl signs it (``at``: its timestamp)."""
    body = options.pop("body", json.dumps({"task": task}).encode())
    moment = int((at or START).timestamp())
    headers = signed_headers(options.pop("secret", SECRET), moment, body)
    response = client.post(f"/ticks/{task}", data=body, headers=headers)
    return response.status_code, response.json or {}


def scheduled(
    client: FlaskClient, key: SigningKey, at: str = "2026-01-05T09:00:00Z", task: str = "sweep",
    **token: Any,
) -> tuple[int, dict[str, Any]]:  # fmt: skip
    """A tick as Cloud Scheduler's HTTP target sends it (OIDC token, its scheduled time)."""
    token = {"aud": TICK_AUDIENCE, "email": SCHEDULER, **token}
    headers = {
        "Authorization": f"Bearer {key.sign(claims(**token))}",
        "X-CloudScheduler": "true",
        "X-CloudScheduler-JobName": f"projects/p/locations/europe-west1/jobs/consumer-{task}",
        "X-CloudScheduler-ScheduleTime": at,
        "Content-Type": "application/octet-stream",
    }
    response = client.post(f"/ticks/{task}", data=b"", headers=headers)
    return response.status_code, response.json or {}


def test_a_signed_tick_runs_once_per_slot_and_a_late_copy_keeps_its_slot(
    client: FlaskClient, clock: Clock
) -> None:
    status, body = signed(client)
    assert (status, body["outcome"], body["key"]) == (200, "done", f"tick:sweep:{SLOT}")
    clock.advance(40)  # the next slot has begun: the late copy is still the 09:00 run
    status, body = signed(client)
    assert (status, body["outcome"], body["key"]) == (200, "duplicate", f"tick:sweep:{SLOT}")


def test_a_signed_tick_and_its_copies(client: FlaskClient, engine: Any) -> None:
    first, again = signed(client), signed(client, secret=OLD_SECRET)  # a rotation's old secret
    assert (first[0], first[1]["outcome"]) == (200, "done")
    assert (again[0], again[1]["outcome"]) == (200, "duplicate")
    (row,) = Inbox(engine).list()
    assert row.message["format"] == "http-tick" and row.message["attributes"] == {"task": "sweep"}


def test_a_cloud_scheduler_tick_is_keyed_by_its_schedule_time(
    client: FlaskClient, clock: Clock, google_key: SigningKey
) -> None:
    first, again = scheduled(client, google_key), scheduled(client, google_key)
    assert (first[0], first[1]["outcome"], first[1]["key"]) == (200, "done", f"tick:sweep:{SLOT}")
    assert (again[0], again[1]["outcome"]) == (200, "duplicate")
    clock.advance(180)  # 09:07:50: a late delivery of the 09:05 run still runs as 09:05's
    status, late = scheduled(client, google_key, at="2026-01-05T09:05:00.000Z")
    assert (status, late["outcome"], late["key"]) == (
        200,
        "done",
        "tick:sweep:2026-01-05T09:05:00+00:00",
    )


def test_a_tick_through_push_and_through_ticks_is_one_run(
    client: FlaskClient, google_key: SigningKey
) -> None:
    pubsub = wrapped_body(
        b'{"task": "sweep"}',
        {"task": "sweep"},
        publish_time=datetime(2026, 1, 5, 9, 0, 1, tzinfo=UTC),
    )
    pushed = client.post("/push", json=pubsub)
    assert (pushed.status_code, pushed.json["outcome"]) == (200, "done")  # type: ignore[index]
    for status, body in (scheduled(client, google_key), signed(client, at=START)):
        assert (status, body["outcome"], body["key"]) == (200, "duplicate", f"tick:sweep:{SLOT}")


def test_stale_future_and_unknown_ticks_follow_the_pubsub_rules(
    client: FlaskClient, google_key: SigningKey, engine: Any
) -> None:
    stale = scheduled(client, google_key, at="2026-01-05T08:50:00Z")[1]
    assert (stale["outcome"], stale["key"]) == ("skipped", "tick:sweep:2026-01-05T08:50:00+00:00")
    future = scheduled(client, google_key, at="2026-01-05T09:10:00Z")[1]
    assert (future["outcome"], future["recorded"]) == ("skipped", False)
    ahead = signed(client, at=START + timedelta(seconds=120))[1]  # within the signing tolerance
    assert (ahead["outcome"], ahead["recorded"]) == ("skipped", False)
    status, unknown = signed(client, task="nope")  # an unknown task's slots are minutes
    assert (status, unknown["outcome"], unknown["key"]) == (200, "unroutable", NOPE)
    assert "no tick task 'nope'" in unknown["error"]
    keys = {row.key for row in Inbox(engine).list()}
    assert keys == {"tick:sweep:2026-01-05T08:50:00+00:00", NOPE}


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({"secret": "not-the-secret-at-all"}, 401),
        ({"body": b'{"task": "cleanup"}'}, 400),  # the body names another task than the path
        ({"body": b"{}"}, 400),  # a signed body must name its task
        ({"body": b"[1]"}, 400),
        ({"at": START - timedelta(seconds=400)}, 401),  # outside the tolerance
    ],
)
def test_bad_signed_ticks_are_refused_and_nothing_is_stored(
    client: FlaskClient, engine: Any, change: dict[str, Any], status: int
) -> None:
    assert signed(client, **change)[0] == status
    assert Inbox(engine).list() == []


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({"aud": "https://consumer.example.com/push"}, 401),
        ({"email": "intruder@p.iam.gserviceaccount.com"}, 403),
        ({"at": "yesterday at nine"}, 400),
    ],
)
def test_bad_oidc_ticks_are_refused_and_nothing_is_stored(
    client: FlaskClient, engine: Any, google_key: SigningKey, change: dict[str, Any], status: int
) -> None:
    assert scheduled(client, google_key, **change)[0] == status
    assert Inbox(engine).list() == []


def test_a_tick_with_no_credentials_is_refused(client: FlaskClient) -> None:
    response = client.post("/ticks/sweep", json={"task": "sweep"})
    assert response.status_code == 401 and "X-Consumer-Signature" in response.json["error"]  # type: ignore[index]


def test_without_credentials_configured_the_endpoint_refuses(
    settings: Settings, engine: Any, google_key: SigningKey, clock: Clock
) -> None:
    client = create_app(Service.of(settings, engine), clock=clock).test_client()
    assert signed(client)[0] == 401
    assert scheduled(client, google_key)[0] == 401
    assert client.post("/ticks/sweep").json["error"].startswith("tick endpoint is disabled")  # type: ignore[index]


@pytest.mark.parametrize("at", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"])
def test_a_schedule_time_out_of_range_is_a_400(
    client: FlaskClient, google_key: SigningKey, at: str
) -> None:
    """It overflowed while parsed (OverflowError: a 500 from gunicorn)."""
    assert scheduled(client, google_key, at=at)[0] == 400
