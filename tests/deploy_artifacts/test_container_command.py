"""The image's commands, run here as the pod runs them: the migration Job's command, then the
image's ENTRYPOINT + CMD with the prod overlay's ConfigMap (bound to loopback, not 0.0.0.0, on
this machine). The probes' endpoints answer as the manifests expect, and SIGTERM drains."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from sqlalchemy import create_engine, inspect

from tests.conftest import free_port, stop_process
from tests.deploy_artifacts.artifacts import (
    POD_SECRETS,
    Doc,
    config_env,
    dockerfile,
    image_command,
    image_env,
    one,
    pod_spec,
)
from tests.deploy_artifacts.conftest import rendered_overlay

pytestmark = pytest.mark.slow


def pod_env(docs: list[Doc], tmp_path: Path, database_url: str) -> dict[str, str]:
    """Image ENV, then the ConfigMap, then the Secrets: the order Kubernetes applies."""
    env = {k: v for k, v in image_env(dockerfile()).items() if k != "PATH"}
    env.update(config_env(docs))
    env.update(POD_SECRETS)
    env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path / "prometheus")
    env["CONSUMER_DATABASE_URL"] = database_url
    env["CONSUMER_LOG_LEVEL"] = "WARNING"
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    if "PYTHONPATH" in os.environ:  # a checkout run without installing it: serve its code
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def run_migration_job(docs: list[Doc], env: dict[str, str]) -> None:
    command = pod_spec(one(docs, "Job"))["containers"][0]["command"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


class Pod:
    """The image's command as a local process, on a loopback port instead of 0.0.0.0:8080."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        env = {**env, "CONSUMER_BIND": self.url.removeprefix("http://")}
        self.process = subprocess.Popen(image_command(dockerfile()), env=env, cwd=cwd)

    def wait_started(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"gunicorn exited with {self.process.returncode}"
            try:
                if requests.get(f"{self.url}/healthz", timeout=1).ok:
                    return
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.1)  # not listening yet, or the workers are still booting
        raise AssertionError("the container command did not start")

    def stop(self) -> int:
        stop_process(self.process, timeout=30)
        return self.process.returncode


@pytest.fixture
def pods() -> Iterator[list[Pod]]:
    started: list[Pod] = []
    yield started
    for pod in started:
        pod.stop()


def test_migrate_then_serve_with_the_prod_configuration(tmp_path: Path, pods: list[Pod]) -> None:
    docs = rendered_overlay("prod")
    database_url = f"sqlite:///{tmp_path / 'consumer.db'}"
    env = pod_env(docs, tmp_path, database_url)
    run_migration_job(docs, env)
    assert "inbox" in inspect(create_engine(database_url)).get_table_names()

    pod = Pod(env, tmp_path)
    pods.append(pod)
    pod.wait_started()
    assert requests.get(f"{pod.url}/readyz", timeout=5).status_code == 200
    # The prod ConfigMap turns OIDC on: an unsigned push is refused, and counted.
    assert requests.post(f"{pod.url}/push", json={}, timeout=5).status_code == 401
    metrics = requests.get(f"{pod.url}/metrics", timeout=5).text
    assert 'status="401"' in metrics
    assert pod.stop() == 0


def test_readiness_fails_without_the_database_but_liveness_holds(
    tmp_path: Path, pods: list[Pod]
) -> None:
    """A database outage takes pods out of the load balancer; it must not restart them."""
    closed = f"postgresql+psycopg://consumer@127.0.0.1:{free_port()}/consumer?connect_timeout=2"
    pod = Pod(pod_env(rendered_overlay("prod"), tmp_path, closed), tmp_path)
    pods.append(pod)
    pod.wait_started()
    assert requests.get(f"{pod.url}/readyz", timeout=10).status_code == 503
    assert requests.get(f"{pod.url}/healthz", timeout=5).status_code == 200
