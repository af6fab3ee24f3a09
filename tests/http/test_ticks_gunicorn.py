"""``POST /ticks/<task>`` through gunicorn: a tick signed with openssl and sent with curl (as the
CronJob in docs/ticks.md does), and one shaped as Cloud Scheduler's HTTP target sends it (an ID
token from a local issuer, ``X-CloudScheduler-ScheduleTime``): each sent twice and once late,
one run per slot, the late one under its scheduled slot."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
import requests

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.inbox.store import Inbox
from tests.auth.tokens import CertsServer, SigningKey, claims
from tests.conftest import Server, settings_env
from tests.http.conftest import SCHEDULER, SECRET, TICK_AUDIENCE

pytestmark = pytest.mark.slow
PERIOD = 4
"""``sweep`` every 4 s: a copy sent 4 s late arrives in the next slot."""
CURL_TICK = r"""
ts=$(date +%s)
body="{\"task\":\"$TASK\"}"
sig=$(printf '%s.%s' "$ts" "$body" | openssl dgst -sha256 -hmac "$SECRET" -hex | sed 's/^.* //')
curl -sS --fail-with-body -X POST "$URL/ticks/$TASK" \
  -H "X-Consumer-Timestamp: $ts" -H "X-Consumer-Signature: v1=$sig" \
  -H 'Content-Type: application/json' --data "$body"
"""
"""The signing commands of docs/ticks.md; here the script sends its one request three times."""


def slot_start() -> int:
    """Wait for the start of a slot (so two copies and the slot clock land in it)."""
    now = time.time()
    time.sleep(PERIOD - now % PERIOD + 0.05)
    return int(time.time()) // PERIOD * PERIOD


@pytest.fixture
def server(
    sqlite_url: str, certs_server: CertsServer, start_server: Callable[..., Server]
) -> Server:
    env = settings_env(
        Settings(database_url=sqlite_url),
        CONSUMER_PUSH_TOKEN="push-token-0123456789abcdef",
        CONSUMER_TICK_HOOK_SECRETS=SECRET,
        CONSUMER_TICK_HOOK_AUDIENCE=TICK_AUDIENCE,
        CONSUMER_TICK_HOOK_SERVICE_ACCOUNTS=SCHEDULER,
        CONSUMER_OIDC_CERTS_URL=certs_server.url,
        CONSUMER_TICK_PERIODS=f"sweep={PERIOD}",
        CONSUMER_TICK_MAX_AGE_PERIODS="3",
    )
    return start_server(env, workers=2)


def keys_of(url: str) -> dict[str, str]:
    engine = make_engine(url)
    try:
        return {row.key: row.status.value for row in Inbox(engine).list()}
    finally:
        engine.dispose()


def test_a_curl_tick_signed_with_openssl_runs_once_per_slot(
    server: Server, sqlite_url: str
) -> None:
    slot = slot_start()
    script = CURL_TICK.replace("ts=$(date +%s)", f"ts={slot}")  # one signed request, resent
    env = {**os.environ, "URL": server.url, "TASK": "sweep", "SECRET": SECRET}
    answers = []
    for wait in (0, 0, PERIOD):  # twice, then once late (the next slot has begun)
        time.sleep(wait)
        run = subprocess.run(["sh", "-c", script], env=env, capture_output=True, timeout=30)
        assert run.returncode == 0, run.stderr
        answers.append(run.stdout.decode())
    key = f"tick:sweep:{datetime.fromtimestamp(slot, UTC).isoformat()}"
    outcomes = [(json.loads(a)["outcome"], json.loads(a)["key"]) for a in answers]
    assert outcomes == [("done", key), ("duplicate", key), ("duplicate", key)]
    assert keys_of(sqlite_url) == {key: "done"}


def test_a_cloud_scheduler_tick_runs_once_per_slot(
    server: Server, sqlite_url: str, google_key: SigningKey
) -> None:
    slot = slot_start()
    token = google_key.sign(claims(aud=TICK_AUDIENCE, email=SCHEDULER))
    scheduled = datetime.fromtimestamp(slot, UTC)
    headers = {
        "Authorization": f"Bearer {token}",
        "User-Agent": "Google-Cloud-Scheduler",
        "X-CloudScheduler": "true",
        "X-CloudScheduler-JobName": "projects/p/locations/europe-west1/jobs/consumer-sweep",
        "X-CloudScheduler-ScheduleTime": scheduled.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "Content-Type": "application/json",
    }
    outcomes = []
    for wait in (0, 0, PERIOD):
        time.sleep(wait)
        response = requests.post(
            f"{server.url}/ticks/sweep", data=b'{"task":"sweep"}', headers=headers, timeout=30
        )
        assert response.status_code == 200, response.text
        outcomes.append((response.json()["outcome"], response.json()["key"]))
    key = f"tick:sweep:{scheduled.isoformat()}"
    assert outcomes == [("done", key), ("duplicate", key), ("duplicate", key)]
    assert keys_of(sqlite_url) == {key: "done"}
