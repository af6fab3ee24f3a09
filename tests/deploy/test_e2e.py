"""Through real gunicorn workers: a burst of identical hooks (a CI pipeline retrying, several
runners announcing the same release) and a Pub/Sub push of it warm the caches exactly once; a
forged hook runs nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from sqlalchemy import Engine

from bench.support.deploy_targets import TargetServer
from consumer.auth.signature import signed_headers
from consumer.config.settings import Settings
from consumer.deploy.hook import HOOK_MAX_BYTES
from consumer.deploy.store import WarmRuns
from consumer.inbox.store import Inbox
from consumer.wire.envelopes_out import deploy_body
from tests.conftest import Server, settings_env
from tests.deploy.conftest import SECRET

BODY = json.dumps({"service": "web", "release": "2026.11.29-1"}).encode()
KEY = "deploy:web:2026.11.29-1"


def post_hook(server: Server, secret: str = SECRET) -> tuple[int, str]:
    headers = {"Content-Type": "application/json"}
    headers.update(signed_headers(secret, int(time.time()), BODY))
    response = requests.post(f"{server.url}/hooks/deploy", data=BODY, headers=headers, timeout=60)
    return response.status_code, response.json()["outcome"]


@pytest.mark.slow
def test_a_burst_of_identical_hooks_and_a_push_warm_once(
    start_server: Callable[..., Server], settings: Settings, engine: Engine, targets: TargetServer
) -> None:
    targets.delay = 0.05
    urls = targets.urls("ok", 40)
    env = settings_env(
        settings, CONSUMER_DEPLOY_HOOK_SECRETS=SECRET, CONSUMER_WARM_TARGETS=",".join(urls),
        CONSUMER_WARM_CONCURRENCY="4",
    )  # fmt: skip
    server = start_server(env, workers=4)
    assert post_hook(server, secret="forged-secret-0123456789abc") == (401, "rejected")
    assert Inbox(engine).get(KEY) is None and sum(targets.hits_of(urls)) == 0

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda _: post_hook(server), range(16)))
    assert answers.count((200, "done")) == 1
    assert set(answers) <= {(200, "done"), (409, "in-progress"), (200, "duplicate")}
    push = requests.post(f"{server.url}/push", json=deploy_body("web", "2026.11.29-1"), timeout=30)
    assert (push.status_code, push.json()["outcome"]) == (200, "duplicate")
    assert post_hook(server) == (200, "duplicate")
    assert targets.hits_of(urls) == [1] * 40
    assert [run.targets_ok for run in WarmRuns(engine).for_key(KEY)] == [40]


def chunked(body: bytes) -> Iterator[bytes]:
    """A generator body: requests sends it with Transfer-Encoding: chunked, no Content-Length."""
    for start in range(0, len(body), 1000):
        yield body[start : start + 1000]


@pytest.mark.slow
def test_chunked_hooks_are_read_within_the_hook_limit(
    start_server: Callable[..., Server], sqlite_url: str, targets: TargetServer
) -> None:
    urls = targets.urls("ok", 2)
    env = settings_env(
        Settings(database_url=sqlite_url, local_mode=True),
        CONSUMER_DEPLOY_HOOK_SECRETS=SECRET, CONSUMER_WARM_TARGETS=",".join(urls),
    )  # fmt: skip
    server = start_server(env, workers=1)
    big = json.dumps({"service": "web", "release": "big", "pad": "x" * HOOK_MAX_BYTES}).encode()
    for body, expected in ((big, (413, "rejected")), (BODY, (200, "done"))):
        headers = signed_headers(SECRET, int(time.time()), body)
        response = requests.post(
            f"{server.url}/hooks/deploy", data=chunked(body), headers=headers, timeout=30
        )
        assert (response.status_code, response.json()["outcome"]) == expected
    assert targets.hits_of(urls) == [1, 1]
