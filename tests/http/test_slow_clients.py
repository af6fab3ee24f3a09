"""Sixteen slow clients (headers or bodies dribbled a byte every few seconds, reconnecting) cannot
starve the workers: against the default ``consumer serve`` and against the container's command,
``/healthz`` and ``/push`` keep answering. bench/slow_clients.py runs the full two minutes.

The attack window here is 30 s: long enough for every attacker to be cut off by the header or
body deadline (10 s) and to come back twice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from bench.support.slow_clients import SlowClients, measure, probe_healthz, probe_push
from consumer.wire.envelopes_out import tick_body
from tests.conftest import free_port, stop_process, wait_until
from tests.deploy_artifacts.artifacts import dockerfile, image_command
from tests.deploy_artifacts.conftest import rendered_overlay
from tests.deploy_artifacts.test_container_command import pod_env, run_migration_job
from tests.http.test_serve import clean_env

pytestmark = pytest.mark.slow
WINDOW_SECONDS = 30
FLOOR = 0.99


def attack(base: str, port: int, push_status: int) -> dict[str, float]:
    clients = SlowClients("127.0.0.1", port, count=16, interval=4.5).start()
    try:
        body = json.dumps(tick_body("cleanup")).encode()
        probes = {"healthz": probe_healthz(base), "push": probe_push(base, body, push_status)}
        result = measure(probes, WINDOW_SECONDS)
    finally:
        clients.stop()
    assert clients.connections > 16, "the attackers were never cut off and reconnected"
    return {name: result.ratio(name) for name in probes}


def test_default_serve_keeps_answering(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "consumer", "serve", "--local", "--bind", f"127.0.0.1:{port}",
         "--tick-seconds", "0"],
        env=clean_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: requests.get(f"{base}/healthz", timeout=2).ok)
        availability = attack(base, port, push_status=200)
    finally:
        stop_process(process, timeout=60)
    assert min(availability.values()) >= FLOOR, availability


def test_container_command_keeps_answering(tmp_path: Path) -> None:
    """The image's ENTRYPOINT + CMD with the prod ConfigMap (OIDC on: an unsigned push is a 401,
    which a worker must still be free to answer)."""
    docs = rendered_overlay("prod")
    env = pod_env(docs, tmp_path, f"sqlite:///{tmp_path / 'consumer.db'}")
    run_migration_job(docs, env)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env["CONSUMER_BIND"] = f"127.0.0.1:{port}"
    process = subprocess.Popen(
        image_command(dockerfile()), env=env, cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: requests.get(f"{base}/healthz", timeout=2).ok)
        availability = attack(base, port, push_status=401)
    finally:
        stop_process(process, timeout=60)
    assert min(availability.values()) >= FLOOR, availability
