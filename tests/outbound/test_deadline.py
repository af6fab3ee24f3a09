"""The warmer's requests end at their timeout, headers and body, however the target drips its
answer (a real server on 127.0.0.1 that sends one byte every 0.2 s)."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import Engine

from bench.support.target_servers import Dripping
from tests.deploy.test_http_warmer import local_engine, warm

__all__ = ["local_engine"]


@pytest.mark.parametrize("headers_first", [True, False], ids=["body", "headers"])
def test_a_dripping_target_times_out_at_the_warm_timeout(
    local_engine: Engine, headers_first: bool
) -> None:
    with Dripping(interval=0.2, length=50, headers_first=headers_first).running() as target:
        started = time.monotonic()
        report = warm(
            local_engine, warm_targets=(f"{target.url}/page",), warm_timeout_ms=1000,
            warm_retries=0,
        )  # fmt: skip
        elapsed = time.monotonic() - started
    (result,) = report.results
    assert elapsed < 2, f"the warm took {elapsed:.1f}s for a 1s timeout"
    assert not result.ok and "timed out" in (result.error or "")
