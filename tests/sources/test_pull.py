"""Pull mode against Google's Pub/Sub emulator: the same exactly-once core, ack = 2xx outcome."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.sources.pull import PullConsumer
from tests.plugins.effects import effect_rows
from triggers.local import stack

pytestmark = pytest.mark.slow
PROJECT = "pull-test"


@pytest.fixture(scope="module")
def pubsub_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = stack.missing()
    if reason:
        pytest.skip(reason)
    port = stack.free_port()
    service = stack.start_pubsub(port, tmp_path_factory.mktemp("pubsub") / "emulator.log", PROJECT)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        service.stop()


def make_subscription(host: str, name: str) -> tuple[str, str]:
    topic = stack.ensure_topic(host, PROJECT, f"{name}-topic")
    path = f"projects/{PROJECT}/subscriptions/{name}"
    request = {"name": path, "topic": topic, "ack_deadline_seconds": 10}
    stack.subscriber(host).create_subscription(request=request)
    return topic, path


def test_pulled_duplicates_and_failures_take_effect_once(
    pubsub_host: str, settings: Settings, engine: Engine, tmp_path: Path
) -> None:
    name = f"pull-{tmp_path.name[-12:].replace('_', '-')}"
    topic, subscription = make_subscription(pubsub_host, name)
    publisher = stack.publisher(pubsub_host)
    releases = [f"r{n}" for n in range(10)]
    futures = []
    for release in releases * 3:  # every deploy published three times, fresh messageIds
        data = json.dumps({"event": "deploy", "service": "web", "release": release}).encode()
        futures.append(publisher.publish(topic, data, event="deploy"))
    flaky = json.dumps({"event": "deploy", "service": "web", "release": "flaky"}).encode()
    futures.append(publisher.publish(topic, flaky, event="deploy", fail="retryable-once"))
    invalid = json.dumps({"event": "deploy", "service": "web"}).encode()  # no release: a 400
    futures.append(publisher.publish(topic, invalid, event="deploy"))
    for future in futures:
        future.result(timeout=30)

    effect_settings = Settings(
        database_url=settings.database_url, local_mode=True, plugins=("tests.plugins.effects",)
    )
    dispatcher = Dispatcher(effect_settings, engine, build_registry(effect_settings))
    consumer = PullConsumer(dispatcher, subscription, 4, client=stack.subscriber(pubsub_host))
    effect_rows(engine)
    stop = threading.Event()
    worker = threading.Thread(target=consumer.run, args=(stop,))
    worker.start()
    try:
        deadline = time.monotonic() + 90
        while len(effect_rows(engine)) < 11 and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(2)  # let any stray redelivery arrive before counting
    finally:
        stop.set()
        worker.join(timeout=60)
    keys = Counter(row.key for row in effect_rows(engine))
    assert set(keys) == {f"deploy:web:{r}" for r in [*releases, "flaky"]}
    assert set(keys.values()) == {1}, keys
    # Everything was acked, the invalid message too: nothing is left to redeliver.
    left = stack.subscriber(pubsub_host).pull(
        request={"subscription": subscription, "max_messages": 50}, timeout=5
    )
    assert list(left.received_messages) == []
