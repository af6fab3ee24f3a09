"""Debian's Prometheus scrapes a real ``consumer serve`` and evaluates the alert rules the prod
overlay ships: the push outcomes the docs promise are series Prometheus stores, queried through
its HTTP API, and every rule group is loaded and evaluated by the live server."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from consumer.wire.envelopes_out import tick_body
from tests.conftest import Server, free_port, stop_process, wait_ready, wait_until
from tests.deploy_artifacts.conftest import rendered_overlay
from tests.deploy_artifacts.prometheus_rules import alert_rules, rule_groups, write_rules

pytestmark = pytest.mark.slow
SCRAPE = "1s"


def prometheus_binary() -> str:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus is missing: scripts/ensure-prometheus installs Debian's package")
    return binary


def scrape_config(target: str, rules: Path) -> dict[str, Any]:
    return {
        "global": {"scrape_interval": SCRAPE, "evaluation_interval": SCRAPE},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {"job_name": "consumer", "metrics_path": "/metrics",
             "static_configs": [{"targets": [target]}]},
        ],
    }  # fmt: skip


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """Start Prometheus scraping ``host:port`` with the prod overlay's rules; yields its URL."""
    binary = prometheus_binary()
    processes: list[subprocess.Popen[bytes]] = []

    def start(target: str) -> str:
        rules = write_rules(rendered_overlay("prod"), tmp_path, interval=SCRAPE)
        config = tmp_path / "prometheus.yml"
        config.write_text(yaml.safe_dump(scrape_config(target, rules)))
        port = free_port()
        log = (tmp_path / "prometheus.log").open("wb")
        process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        processes.append(process)
        url = f"http://127.0.0.1:{port}"
        wait_ready(f"{url}/-/ready", process)
        return url

    yield start
    for process in processes:
        stop_process(process)


def query(url: str, promql: str) -> list[dict[str, Any]]:
    answer = requests.get(f"{url}/api/v1/query", params={"query": promql}, timeout=10).json()
    assert answer["status"] == "success", answer
    return list(answer["data"]["result"])


def test_prometheus_scrapes_serve_and_evaluates_every_alert_rule(
    prometheus: Callable[[str], str], sqlite_url: str, start_server: Callable[..., Server]
) -> None:
    env = {"CONSUMER_DATABASE_URL": sqlite_url, "CONSUMER_LOCAL_MODE": "true",
           "CONSUMER_LOG_LEVEL": "WARNING"}  # fmt: skip
    server = start_server(env, workers=1)
    url = prometheus(server.url.removeprefix("http://"))
    for _ in range(3):
        assert requests.post(f"{server.url}/push", json=tick_body("cleanup"), timeout=30).ok
    assert requests.post(f"{server.url}/push", data=b"{", timeout=30).status_code == 400

    decided = 'consumer_push_decisions_total{job="consumer",route="tick"}'
    wait_until(lambda: bool(query(url, decided)), timeout=30, every=0.5)
    outcomes = {s["metric"]["outcome"]: float(s["value"][1]) for s in query(url, decided)}
    assert outcomes.get("done", 0) + outcomes.get("duplicate", 0) == 3, outcomes
    refused = query(url, 'consumer_push_decisions_total{status="400"}')
    assert [float(s["value"][1]) for s in refused] == [1.0]
    assert query(url, 'up{job="consumer"}')[0]["value"][1] == "1"

    expected = set(alert_rules(rule_groups(rendered_overlay("prod"))))
    wait_until(lambda: evaluated_alerts(url) == expected, timeout=30, every=0.5)


def evaluated_alerts(url: str) -> set[str]:
    """The alerting rules the server has evaluated without error at least once."""
    groups = requests.get(f"{url}/api/v1/rules", timeout=10).json()["data"]["groups"]
    return {
        rule["name"]
        for group in groups
        for rule in group["rules"]
        if rule["type"] == "alerting" and rule["health"] == "ok" and _evaluated(rule)
    }


def _evaluated(rule: dict[str, Any]) -> bool:
    return not str(rule.get("lastEvaluation", "")).startswith("0001-")
