"""Fixtures of the deploy tests: the counting target server and deploy-hook settings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.support.deploy_targets import TargetServer

SECRET = "test-secret-0123456789abcdef"
OLD_SECRET = "old-secret-0123456789abcdef"


@pytest.fixture
def targets() -> Iterator[TargetServer]:
    server = TargetServer().start()
    yield server
    server.stop()
