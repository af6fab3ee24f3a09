"""``consumer serve`` as a developer runs it: the workers' metrics are summed without any
PROMETHEUS_MULTIPROC_DIR in the environment, and a local tick writes one line, its decision."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from consumer.ticks import stand_in as local_ticks
from consumer.wire.envelopes_out import tick_body
from tests.conftest import free_port, stop_process, wait_ready
from tests.support.metrics_text import total

pytestmark = pytest.mark.slow
PUSHES = 16


def test_serve_sums_its_workers_and_a_tick_is_one_line(sqlite_url: str, tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "stderr.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONSUMER_", "PROMETHEUS_"))}
    env["CONSUMER_DATABASE_URL"] = sqlite_url
    command = [
        sys.executable, "-m", "consumer", "serve", "--local", "--workers", "3",
        "--bind", f"127.0.0.1:{port}", "--tick-seconds", "1", "--log-format", "json",
    ]  # fmt: skip
    with log.open("w") as stderr:
        process = subprocess.Popen(command, env=env, cwd=tmp_path, stderr=stderr)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(f"{url}/readyz", process)
        body = tick_body("cleanup")
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda _: deliver(url, body), range(PUSHES)))
        assert [code for code, _ in answers] == [200] * PUSHES
        in_progress = sum(busy for _, busy in answers)
        time.sleep(2.5)  # local ticks: a sweep and a cleanup each second
        text = requests.get(f"{url}/metrics", timeout=10).text
        assert total(text, "consumer_push_decisions_total", outcome="in-progress") >= in_progress
        ticks = total(text, "consumer_push_decisions_total") - PUSHES - in_progress
        assert total(text, "consumer_push_decisions_total", outcome="duplicate") >= PUSHES - 1
        assert ticks >= 2
    finally:
        stop_process(process, timeout=60)
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    decisions = [line for line in lines if line["message"] == "decided"]
    assert len(decisions) >= PUSHES + in_progress + ticks
    # No access line and no ticker line: the decision is the one line. (The ticker still warns
    # when a tick cannot be sent, e.g. before gunicorn listens.)
    ticker = [line for line in lines if line["logger"] == local_ticks.log.name]
    assert all("failed" in line["message"] for line in ticker), ticker
    access = [line for line in lines if line["logger"] == "gunicorn.access"]
    assert [line for line in access if line["httpRequest"]["requestUrl"] == "/push"] == []


def deliver(url: str, body: dict[str, object]) -> tuple[int, int]:
    """Push until the answer is not 409, as Pub/Sub redelivers: a concurrent copy of the same
    tick (or the local ticker's own cleanup) may still hold the claim on a loaded machine.
    Returns the last status and how many 409s came first."""
    for busy in range(50):
        status = requests.post(f"{url}/push", json=body, timeout=30).status_code
        if status != 409:
            return status, busy
        time.sleep(0.2)
    return 409, 50
