"""Under gunicorn with several workers, /metrics sums every worker's counters (the multiprocess
directory), whichever worker answers the scrape, and shows the database's state once."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from sqlalchemy import Engine

from consumer.db.engine import make_engine
from consumer.jobs.store import enqueue
from consumer.wire.envelopes_out import tick_body
from tests.conftest import Server
from tests.jobs import kinds_plugin
from tests.support.metrics_text import total

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
PUSHES = 24
BAD = 8
ROUND = 12
MAX_ROUNDS = 10


def post(url: str, index: int) -> int:
    if index < BAD:
        return requests.post(f"{url}/push", data=b"not json", timeout=30).status_code
    body = tick_body("cleanup", message_id=f"m-{index}")
    return requests.post(f"{url}/push", json=body, timeout=30).status_code


def push_until_two_workers_served(url: str, directory: Path) -> int:
    """``PUSHES`` pushes (``BAD`` of them refused), then more in rounds until a second worker
    has counted one (the kernel may hand one worker every connection of a round); how many."""
    sent = 0
    with ThreadPoolExecutor(6) as pool:
        for _ in range(MAX_ROUNDS):
            count = PUSHES if sent == 0 else ROUND
            statuses = list(pool.map(lambda i: post(url, i), range(sent, sent + count)))
            assert statuses.count(400) == (BAD if sent == 0 else 0), statuses
            sent += count
            if len(list(directory.glob("counter_*.db"))) >= 2:
                return sent
    raise AssertionError(f"only one worker served {sent} pushes")


def test_a_scrape_sums_every_worker(
    postgres_url: str, start_server: Callable[..., Server], tmp_path: Path
) -> None:
    engine: Engine = make_engine(postgres_url)
    try:
        kinds_plugin.runs_metadata.create_all(engine)
        for payload in ({}, {}, {"fail": "permanent"}):
            enqueue(engine, "record", payload, allow_unknown=True)  # the server's plugin's kind
        directory = tmp_path / "prometheus"
        directory.mkdir()
        server = start_server(
            {
                "CONSUMER_DATABASE_URL": postgres_url,
                "CONSUMER_LOCAL_MODE": "true",
                "CONSUMER_LOG_LEVEL": "WARNING",
                "CONSUMER_PLUGINS": "tests.jobs.kinds_plugin",
                "PROMETHEUS_MULTIPROC_DIR": str(directory),
            },
            workers=3,
        )
        pushes = push_until_two_workers_served(server.url, directory)
        assert requests.post(f"{server.url}/push", json=tick_body("sweep"), timeout=30).ok
        for _ in range(6):  # each scrape may reach another worker: all must agree
            text = requests.get(f"{server.url}/metrics", timeout=30).text
            assert total(text, "consumer_push_decisions_total") == pushes + 1
            assert total(text, "consumer_push_decisions_total", status="400") == BAD
            assert total(text, "consumer_handler_seconds_count", route="tick") == pushes - BAD + 1
            assert total(text, "consumer_job_results_total", kind="record", result="done") == 2
            assert total(text, "consumer_job_results_total", kind="record", result="dead") == 1
            assert total(text, "consumer_jobs", kind="record", status="dead") == 1
            assert total(text, "consumer_state_up") == 1
    finally:
        engine.dispose()
