"""Through Google's Pub/Sub emulator: jobs published by a non-Python producer (``curl`` against
the emulator's REST API) each become one job that runs once, and wake-ups start jobs within a
fraction of a second, long before the next ``sweep`` tick."""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import func, select

from bench import start_latency
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.jobs.schema import jobs
from consumer.jobs.tick import SWEEP_PERIOD_SECONDS
from tests.conftest import Server, settings_env
from tests.jobs import kinds_plugin
from triggers.local import stack

PROJECT = start_latency.PROJECT


@pytest.fixture(scope="module")
def pubsub_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if reason := stack.missing():
        pytest.skip(reason)
    port = stack.free_port()
    service = stack.start_pubsub(port, tmp_path_factory.mktemp("pubsub") / "log", PROJECT)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        service.stop()


def curl_publish(host: str, topic: str, payload: dict[str, object], **attributes: str) -> None:
    """One message published the way any language's HTTP client can."""
    data = base64.b64encode(json.dumps(payload).encode()).decode()
    body = json.dumps({"messages": [{"data": data, "attributes": attributes}]})
    url = f"http://{host}/v1/projects/{PROJECT}/topics/{topic}:publish"
    subprocess.run(["curl", "-sSf", "-X", "POST", "-H", "Content-Type: application/json",
                    "-d", body, url], check=True, capture_output=True, timeout=30)  # fmt: skip


@pytest.mark.slow
@pytest.mark.postgres
def test_jobs_published_twice_with_curl_are_one_job_each_run_once(
    pubsub_host: str, postgres_url: str, start_server: Callable[..., Server]
) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    settings = Settings.of(database_url=postgres_url, local_mode=True,
                           plugins=("tests.jobs.kinds_plugin",))  # fmt: skip
    engine = make_engine(postgres_url)
    kinds_plugin.runs_metadata.create_all(engine)
    wakeups = stack.ensure_topic(pubsub_host, PROJECT, "curl-wakeups")
    env = settings_env(settings, CONSUMER_WAKE_TOPIC=wakeups, PUBSUB_EMULATOR_HOST=pubsub_host)
    server = start_server(env, workers=2)
    for topic in ("curl-jobs", "curl-wakeups"):
        stack.ensure_topic(pubsub_host, PROJECT, topic)
        stack.ensure_push_subscription(pubsub_host, PROJECT, f"{topic}-push", topic,
                                       f"{server.url}/push", 10)  # fmt: skip
    for n in range(10):
        for _ in range(2):
            curl_publish(pubsub_host, "curl-jobs", {"n": n}, job_kind="record", job_key=f"c{n}")
    deadline = time.monotonic() + 30
    while len(kinds_plugin.run_counts(engine)) < 10 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)  # any late duplicate would show now
    with engine.connect() as connection:
        assert connection.scalar(select(func.count()).select_from(jobs)) == 10
    assert sorted(kinds_plugin.run_counts(engine).values()) == [1] * 10
    engine.dispose()


@pytest.mark.slow
@pytest.mark.postgres
def test_wake_ups_start_jobs_long_before_the_next_tick(pubsub_host: str, postgres_url: str) -> None:
    args = argparse.Namespace(jobs=20, rate=10.0, pods=2, workers=1, max_seconds=10.0)
    found = start_latency.measure(pubsub_host, postgres_url, args)
    assert len(found) == 20, "every job started"
    assert statistics.median(found) < 1000 and max(found) < 5000
    assert max(found) < SWEEP_PERIOD_SECONDS * 1000 / 10
