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
from consumer.envelopes_out import tick_body
from consumer.jobs.store import enqueue
from tests.conftest import Server
from tests.core.metrics_text import total
from tests.jobs import kinds_plugin

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
PUSHES = 24
BAD = 8


def post(url: str, index: int) -> int:
    if index < BAD:
        return requests.post(f"{url}/push", data=b"not json", timeout=30).status_code
    body = tick_body("cleanup", message_id=f"m-{index}")
    return requests.post(f"{url}/push", json=body, timeout=30).status_code


def test_a_scrape_sums_every_worker(
    postgres_url: str, start_server: Callable[..., Server], tmp_path: Path
) -> None:
    engine: Engine = make_engine(postgres_url)
    kinds_plugin.runs_metadata.create_all(engine)
    for payload in ({}, {}, {"fail": "permanent"}):
        enqueue(engine, "record", payload, allow_unknown=True)  # the kind is the server's plugin
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
    with ThreadPoolExecutor(6) as pool:
        statuses = list(pool.map(lambda i: post(server.url, i), range(PUSHES)))
    assert statuses.count(400) == BAD
    assert requests.post(f"{server.url}/push", json=tick_body("sweep"), timeout=30).ok
    assert len(list(directory.glob("counter_*.db"))) >= 2, "only one worker served"
    for _ in range(6):  # each scrape may reach another worker: all must agree
        text = requests.get(f"{server.url}/metrics", timeout=30).text
        assert total(text, "consumer_push_decisions_total") == PUSHES + 1
        assert total(text, "consumer_push_decisions_total", status="400") == BAD
        assert total(text, "consumer_handler_seconds_count", route="tick") == PUSHES - BAD + 1
        assert total(text, "consumer_job_results_total", kind="record", result="done") == 2
        assert total(text, "consumer_job_results_total", kind="record", result="dead") == 1
        assert total(text, "consumer_jobs", kind="record", status="dead") == 1
        assert total(text, "consumer_state_up") == 1
    engine.dispose()
