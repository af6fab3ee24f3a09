"""Duplicate, concurrent, crashed and outage deliveries through a real gunicorn server on
PostgreSQL. The handler's effect is non-idempotent (a row per run), so a double run shows."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from sqlalchemy import Engine

from bench.support.tcpproxy import TcpProxy
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.wire.envelopes_out import deploy_body, storage_body
from tests.conftest import Server, settings_env, wait_until
from tests.plugins.effects import effect_rows

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
ACKED = {102, 200, 201, 202, 204}
EFFECTS = "tests.plugins.effects"


def push(server: Server, body: dict[str, Any], path: str = "/push") -> requests.Response:
    return requests.post(f"{server.url}{path}", json=body, timeout=60)


@pytest.fixture
def pg_engine(postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_url)
    effect_rows(engine)  # creates the effects table before concurrent handlers race to
    yield engine
    engine.dispose()


def effect_settings(url: str, **changes: Any) -> Settings:
    return Settings.of(database_url=url, local_mode=True, plugins=(EFFECTS,), **changes)


@pytest.mark.parametrize(
    ("app", "path"),
    [(None, "/push"), ("tests.http.host:asgi()", "/consumer/push")],
    ids=["service", "embedded"],
)
def test_same_event_50_times_from_8_workers_takes_effect_once(
    postgres_url: str,
    pg_engine: Engine,
    start_server: Callable[..., Server],
    app: str | None,
    path: str,
) -> None:
    """The service's own app, and another team's app with the consumer mounted in it."""
    server = start_server(settings_env(effect_settings(postgres_url)), workers=4, app=app)
    body = deploy_body("web", "concurrent")
    body["message"]["attributes"]["sleep"] = "0.3"  # keep the first run busy while others arrive
    with ThreadPoolExecutor(max_workers=8) as pool:
        responses = list(pool.map(lambda _: push(server, body, path), range(50)))
    outcomes = Counter((r.status_code, r.json()["outcome"]) for r in responses)
    assert outcomes[(200, "done")] == 1, outcomes
    assert set(outcomes) <= {(200, "done"), (200, "duplicate"), (409, "in-progress")}, outcomes
    assert outcomes[(409, "in-progress")] > 0, "deliveries did not overlap; the test proved nothing"
    assert len(effect_rows(pg_engine)) == 1


def test_storage_duplicates_with_fresh_message_ids_hammered_take_effect_once(
    postgres_url: str, pg_engine: Engine, start_server: Callable[..., Server]
) -> None:
    """Like Pub/Sub: every nack is redelivered until acked; 20 objects x 10 copies each."""
    server = start_server(settings_env(effect_settings(postgres_url)), workers=4)
    copies = [storage_body("bucket", f"obj-{n}.csv", "1") for n in range(20) for _ in range(10)]

    def deliver_until_acked(body: dict[str, Any]) -> int:
        for attempt in range(1, 100):
            if push(server, body).status_code in ACKED:
                return attempt
            time.sleep(0.05)
        raise AssertionError("never acked")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(deliver_until_acked, copies))
    keys = Counter(row.key for row in effect_rows(pg_engine))
    assert len(keys) == 20 and set(keys.values()) == {1}, keys


def test_worker_killed_mid_handler_is_taken_over_after_the_lease(
    postgres_url: str, pg_engine: Engine, start_server: Callable[..., Server]
) -> None:
    settings = effect_settings(postgres_url, ack_deadline_seconds=10, safety_margin_seconds=1)
    server = start_server(settings_env(settings), workers=2)
    body = deploy_body("web", "crash")
    body["message"]["attributes"]["hang"] = "30"
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(push, server, body)
        pid = wait_for_started_pid(pg_engine)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(requests.RequestException):
            pending.result()
    assert push(server, body).status_code == 409  # the dead worker's lease is still live
    time.sleep(settings.lease_seconds + 1)
    retried = push(server, body)
    assert (retried.status_code, retried.json()["outcome"], retried.json()["attempt"]) == (
        200,
        "done",
        2,
    )
    assert len(effect_rows(pg_engine)) == 1


def wait_for_started_pid(engine: Engine, timeout: float = 20) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        started = effect_rows(engine, stage="started")
        if started:
            return int(started[0].pid)
        time.sleep(0.1)
    raise AssertionError("handler never started")


def test_database_outage_gives_503_and_nothing_is_lost(
    postgres_url: str, pg_engine: Engine, start_server: Callable[..., Server]
) -> None:
    proxy = TcpProxy(5432)
    proxy.start()
    proxied = postgres_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    server = start_server(settings_env(effect_settings(proxied)), workers=2)
    assert push(server, deploy_body("web", "before")).status_code == 200
    proxy.stop()
    during = [deploy_body("web", f"during-{n}") for n in range(5)]
    for body in during:
        response = push(server, body)
        assert (response.status_code, response.json()["outcome"]) == (503, "unavailable")
        assert "database unavailable" in response.json()["error"]
    assert requests.get(f"{server.url}/readyz", timeout=30).status_code == 503
    proxy.start()
    for body in during:  # Pub/Sub redelivers what was nacked: each runs on its first try
        response = push(server, body)
        assert (response.status_code, response.json()["outcome"]) == (200, "done"), response.text
    assert requests.get(f"{server.url}/readyz", timeout=30).status_code == 200
    assert len(effect_rows(pg_engine)) == 6
    proxy.stop()


def test_database_lost_mid_handler_never_doubles_the_effect(
    postgres_url: str, pg_engine: Engine, start_server: Callable[..., Server]
) -> None:
    proxy = TcpProxy(5432)
    proxy.start()
    proxied = postgres_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    settings = effect_settings(proxied, ack_deadline_seconds=10, safety_margin_seconds=1)
    server = start_server(settings_env(settings), workers=2)
    body = deploy_body("web", "cut")
    body["message"]["attributes"]["sleep"] = "1.5"
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(push, server, body)
        time.sleep(0.7)  # claimed, now sleeping before its effect
        proxy.stop()
        first = pending.result()
    assert first.status_code == 503
    proxy.start()
    deadline = time.monotonic() + settings.lease_seconds + 15
    while (answer := push(server, body)).status_code not in ACKED:
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.5)
    assert answer.json()["outcome"] == "done"
    assert len(effect_rows(pg_engine)) == 1
    row = Inbox(pg_engine).get("deploy:web:cut")
    assert row is not None and row.status is Status.DONE
    proxy.stop()


def test_a_4s_cut_while_recording_the_outcome_neither_repeats_nor_loses_the_effect(
    postgres_url: str, pg_engine: Engine, start_server: Callable[..., Server]
) -> None:
    """The finish is retried for as long as the lease leaves room: the effect made before the
    cut is recorded after it, and the redelivery finds it done instead of running it again."""
    proxy = TcpProxy(5432)
    proxy.start()
    proxied = postgres_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    settings = effect_settings(proxied, ack_deadline_seconds=20, safety_margin_seconds=2)
    server = start_server(settings_env(settings), workers=2)
    body = deploy_body("web", "cut-while-finishing")
    body["message"]["attributes"]["after"] = "0.5"  # the effect is made, then the finish
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(push, server, body)
        wait_until(lambda: len(effect_rows(pg_engine)) == 1, timeout=20, every=0.02)
        proxy.stop()
        time.sleep(4)
        proxy.start()
        answer = pending.result()
    assert (answer.status_code, answer.json()["outcome"]) == (200, "done"), answer.text
    row = Inbox(pg_engine).get("deploy:web:cut-while-finishing")
    assert row is not None and row.status is Status.DONE
    again = push(server, body)
    assert (again.status_code, again.json()["outcome"]) == (200, "duplicate")
    assert len(effect_rows(pg_engine)) == 1
    proxy.stop()


def test_a_copy_acked_in_progress_still_completes_once_when_the_running_pod_dies(
    postgres_url: str, pg_engine: Engine, start_server: Callable[..., Server]
) -> None:
    """Two pods. A copy under a new messageId is acknowledged while the first runs; the first
    pod is SIGKILLed; its own (unacknowledged) message comes back and completes the event."""
    settings = effect_settings(postgres_url, ack_deadline_seconds=10, safety_margin_seconds=1)
    doomed, survivor = (start_server(settings_env(settings), workers=1) for _ in range(2))
    running = deploy_body("web", "pod-dies", message_id="running-message")
    running["message"]["attributes"]["hang"] = "30"
    copy = deploy_body("web", "pod-dies", message_id="copy-message")
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(push, doomed, running)
        worker = wait_for_started_pid(pg_engine)
        acked = push(survivor, copy)
        assert (acked.status_code, acked.json()["outcome"]) == (200, "in-progress")
        for pid in (worker, doomed.process.pid):
            os.kill(pid, signal.SIGKILL)
        doomed.process.wait()
        with pytest.raises(requests.RequestException):
            pending.result()
    assert push(survivor, running).status_code == 409  # the dead pod's lease is still live
    time.sleep(settings.lease_seconds + 1)
    redelivered = push(survivor, running)
    assert (redelivered.status_code, redelivered.json()["outcome"]) == (200, "done")
    assert redelivered.json()["attempt"] == 2
    assert push(survivor, copy).json()["outcome"] == "duplicate"
    assert len(effect_rows(pg_engine)) == 1
