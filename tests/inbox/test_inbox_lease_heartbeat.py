"""The inbox claim's short lease through a real gunicorn server on PostgreSQL: a live handler that
outlasts the lease keeps its claim (the process's heartbeat renews it every second), and a killed
worker's claim is taken over by a redelivery within 5 s. The handler's effect is a row per run."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from sqlalchemy import Engine

from consumer.db.engine import make_engine
from consumer.wire.envelopes_out import deploy_body
from tests.conftest import Server, settings_env
from tests.http.test_delivery_through_gunicorn import effect_settings, push, wait_for_started_pid
from tests.plugins.effects import effect_rows

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture
def pg_engine(postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_url)
    effect_rows(engine)  # creates the effects table before the handlers write to it
    yield engine
    engine.dispose()


def test_a_handler_longer_than_the_lease_keeps_its_claim(
    postgres_url: str, pg_engine: Engine, start_server: Callable[..., Server]
) -> None:
    settings = effect_settings(postgres_url, inbox_lease_seconds=2)
    server = start_server(settings_env(settings), workers=2)
    body = deploy_body("web", "long")
    body["message"]["attributes"]["sleep"] = "5"  # 2.5 leases
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(push, server, body)
        redeliveries = []
        for _ in range(8):  # redeliveries all through the run, the last past two leases
            time.sleep(0.5)
            redeliveries.append(push(server, body).status_code)
        assert first.result().status_code == 200
    assert set(redeliveries) == {409}, redeliveries
    assert len(effect_rows(pg_engine)) == 1


def test_a_killed_workers_claim_is_taken_over_within_5_s(
    postgres_url: str, pg_engine: Engine, start_server: Callable[..., Server]
) -> None:
    settings = effect_settings(postgres_url)  # the default lease
    server = start_server(settings_env(settings), workers=2)
    body = deploy_body("web", "killed")
    body["message"]["attributes"]["hang"] = "30"
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(push, server, body)
        pid = wait_for_started_pid(pg_engine)
        time.sleep(1.5)  # renewed at least once
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        with pytest.raises(requests.RequestException):
            pending.result()
    while (answer := push(server, body)).status_code == 409:
        assert time.monotonic() - killed_at < 8, "the dead worker's claim was not taken over"
        time.sleep(0.1)
    taken_over = time.monotonic() - killed_at
    assert (answer.status_code, answer.json()["attempt"]) == (200, 2), answer.text
    assert taken_over <= 5.0, f"taken over {taken_over:.1f} s after the kill"
