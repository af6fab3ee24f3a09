"""The one-line increments in other modules reach /metrics: cache-warming targets by warmer and
result, and failed fetches of the OIDC certificates (against a real refusing port)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from sqlalchemy import Engine

from consumer.auth.certs import CachedCerts
from consumer.config.settings import Settings
from consumer.errors import Unavailable
from consumer.observe.metrics import process_registry
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.wire.envelope import Limits, parse_wrapped
from consumer.wire.envelopes_out import deploy_body
from tests.conftest import free_port
from tests.support.metrics_text import total


def scrape() -> str:
    return generate_latest(process_registry()).decode()


def test_warm_targets_are_counted_by_warmer_and_result(settings: Settings, engine: Engine) -> None:
    config = Settings(
        database_url=settings.database_url, local_mode=True, plugins=("tests.deploy.plugin",)
    )
    before = scrape()
    outcome = Dispatcher(config, engine, build_registry(config)).dispatch(
        parse_wrapped(deploy_body("web", "v1"), Limits())
    )
    assert outcome.kind == "done"
    after = scrape()

    def delta(**labels: str) -> float:
        return total(after, "consumer_warm_targets_total", **labels) - total(
            before, "consumer_warm_targets_total", **labels
        )

    assert (delta(warmer="search", result="ok"), delta(warmer="search", result="failed")) == (3, 1)
    assert delta(warmer="broken", result="failed") == 1


def test_a_failed_certificate_fetch_is_counted() -> None:
    certs = CachedCerts(f"http://127.0.0.1:{free_port()}/certs", failure_backoff=0)
    before = total(scrape(), "consumer_oidc_cert_fetch_failures_total")
    for _ in range(2):
        with pytest.raises(Unavailable):
            certs.ensure("any-kid")
    assert total(scrape(), "consumer_oidc_cert_fetch_failures_total") - before == 2


@pytest.mark.slow
def test_a_cli_process_runs_whatever_the_metrics_directory(tmp_path: Path) -> None:
    """The migration Job and CLI commands import the metrics with the image's
    PROMETHEUS_MULTIPROC_DIR set, before any server created it (or where none can be)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for directory in (tmp_path / "not" / "yet", blocker / "cannot-be"):
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
        result = subprocess.run(
            [sys.executable, "-m", "consumer", "settings"],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
    assert (tmp_path / "not" / "yet").is_dir()
