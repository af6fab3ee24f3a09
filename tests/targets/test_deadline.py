"""A target's call ends at its deadline, headers and body, however the target drips its answer
(a real server on 127.0.0.1 that sends one byte every 0.2 s: each read is quick, so requests'
per-read timeout alone held the call until the last byte)."""

from __future__ import annotations

import time

import pytest

from bench.support.target_servers import Dripping
from consumer.errors import Retryable
from tests.targets.test_call import call, caller


def test_a_body_dripped_past_the_timeout_is_cut_off_and_the_answer_kept() -> None:
    with Dripping(interval=0.2, length=50).running() as target:
        started = time.monotonic()
        result = call(caller(target.url, timeout_seconds=1), seconds=9)
        elapsed = time.monotonic() - started
    assert elapsed < 2, f"the call took {elapsed:.1f}s for a 1s timeout"
    assert result["status"] == 200 and "answer_incomplete" in result


def test_headers_dripped_past_the_timeout_time_out() -> None:
    with Dripping(interval=0.2, length=50, headers_first=False).running() as target:
        started = time.monotonic()
        with pytest.raises(Retryable, match="timed out"):
            call(caller(target.url, timeout_seconds=1), seconds=9)
        elapsed = time.monotonic() - started
    assert elapsed < 2, f"the call took {elapsed:.1f}s for a 1s timeout"


def test_the_budget_ends_a_dripping_call_before_the_targets_timeout() -> None:
    with Dripping(interval=0.2, length=50).running() as target:
        started = time.monotonic()
        result = call(caller(target.url, timeout_seconds=30), seconds=1.5)
        elapsed = time.monotonic() - started
    assert elapsed < 1.5, f"the call took {elapsed:.1f}s for a 1.5s budget"
    assert "answer_incomplete" in result
