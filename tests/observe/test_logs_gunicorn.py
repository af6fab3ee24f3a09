"""Under the image's gunicorn configuration every line on stderr (gunicorn's own, access lines
included) is one JSON object with time, severity and message; a request's lines carry its trace;
a push writes one line, its decision."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from consumer.wire.envelopes_out import tick_body
from tests.conftest import Server

pytestmark = pytest.mark.slow
TRACE = "105445aa7843bc8bf206b12000100000"
PROJECT = "acme-consumer-prod"


@pytest.fixture
def gunicorn_stderr(sqlite_url: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The image's command (config module included) on loopback, its output in a file."""
    log = tmp_path / "stderr.log"
    env = {
        "CONSUMER_DATABASE_URL": sqlite_url, "CONSUMER_LOCAL_MODE": "true",
        "CONSUMER_LOG_FORMAT": "json", "CONSUMER_PROJECT_ID": PROJECT,
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
    }  # fmt: skip
    with Server(env, workers=2, output=log) as server:
        yield server.url, log


def json_lines(log: Path) -> list[dict[str, Any]]:
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    parsed = [json.loads(line) for line in lines]  # every line must be JSON
    for line in parsed:
        assert {"time", "severity", "message"} <= line.keys(), line
    return parsed


def test_every_line_is_json_and_a_request_carries_its_trace(
    gunicorn_stderr: tuple[str, Path],
) -> None:
    url, log = gunicorn_stderr
    cloud = {"X-Cloud-Trace-Context": f"{TRACE}/255;o=1"}
    assert requests.get(f"{url}/openapi.yaml", headers=cloud, timeout=10).ok
    assert requests.get(f"{url}/healthz", timeout=10).ok
    assert requests.get(f"{url}/metrics", timeout=10).ok
    parent = {"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"}
    assert requests.post(f"{url}/push", json=tick_body("cleanup"), headers=parent, timeout=30).ok
    time.sleep(0.5)  # the access line is written after the response
    lines = json_lines(log)
    assert any(line["logger"] == "gunicorn.error" for line in lines), "gunicorn's own lines"
    access = [line for line in lines if line["logger"] == "gunicorn.access"]
    urls = [line["httpRequest"]["requestUrl"] for line in access]
    assert urls == ["/openapi.yaml"], "successful probes and scrapes are not logged"
    served = access[0]
    assert served["httpRequest"]["status"] == 200
    assert served["logging.googleapis.com/trace"] == f"projects/{PROJECT}/traces/{TRACE}"
    assert served["logging.googleapis.com/spanId"] == "00000000000000ff"
    about_push = [line for line in lines if "/push" in json.dumps(line) or "key" in line]
    assert len(about_push) == 1, about_push  # one line per decision
    decision = about_push[0]
    assert decision["message"] == "decided"
    assert decision["logging.googleapis.com/trace"] == f"projects/{PROJECT}/traces/{TRACE}"
    assert decision["logging.googleapis.com/spanId"] == "00f067aa0ba902b7"
