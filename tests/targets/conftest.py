"""Targets for the tests: a Python HTTP server, and the Node.js one (skipped without node)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.support.target_servers import NODE, NodeTarget, PyTarget


@pytest.fixture
def py_target() -> Iterator[PyTarget]:
    with PyTarget().running() as target:
        yield target


@pytest.fixture
def node_target() -> Iterator[NodeTarget]:
    if NODE is None:
        pytest.skip("node is not installed (scripts/test installs Debian's nodejs when missing)")
    target = NodeTarget()
    yield target
    target.stop()
