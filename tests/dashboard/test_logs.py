"""``consumer dashboard`` (the real command, gunicorn and all) writes the lines ``serve`` writes:
with ``CONSUMER_LOG_FORMAT=json`` every line on stderr, gunicorn's own and its access lines
included, is one JSON object with time, severity, message and logger, a request's carrying its
trace; successful probes are not logged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import free_port, server_env, stop_process, wait_ready

pytestmark = pytest.mark.slow
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def json_lines(text: str) -> list[dict[str, Any]]:
    parsed = [json.loads(line) for line in text.splitlines() if line.strip()]  # each one JSON
    for line in parsed:
        assert {"time", "severity", "message", "logger"} <= line.keys(), line
    return parsed


def test_the_dashboard_logs_json_lines_like_serve(sqlite_url: str, tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "dashboard.log"
    env = server_env({
        "CONSUMER_DATABASE_URL": sqlite_url, "CONSUMER_LOG_FORMAT": "json",
        "CONSUMER_PROJECT_ID": "acme",
    })  # fmt: skip
    command = [sys.executable, "-m", "consumer", "dashboard", "--local",
               "--bind", f"127.0.0.1:{port}", "--workers", "1"]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(f"{url}/healthz", process)
        parent = {"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"}
        assert requests.get(f"{url}/jobs", headers=parent, timeout=10).ok
        assert requests.get(f"{url}/no-such-page", timeout=10).status_code == 404
    finally:
        stop_process(process)
    lines = json_lines(log.read_text())
    assert any(line["logger"] == "gunicorn.error" for line in lines), "gunicorn's own lines"
    access = [line for line in lines if line["logger"] == "gunicorn.access"]
    assert [line["httpRequest"]["requestUrl"] for line in access] == ["/jobs", "/no-such-page"]
    assert [line["httpRequest"]["status"] for line in access] == [200, 404]
    assert access[0]["logging.googleapis.com/trace"] == f"projects/acme/traces/{TRACE}"
