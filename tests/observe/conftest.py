"""Spans collected in memory by the real SDK, for the tests that assert a trace's shape."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench.support.target_servers import PyTarget
from consumer.observe import spans
from triggers.local import stack


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    """Every span ended while the test runs (tracing is off again after it)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans.install(provider.get_tracer("tests"))
    yield exporter
    spans.install(None)
    provider.shutdown()


@pytest.fixture
def target() -> Iterator[PyTarget]:
    """A real HTTP target on loopback that records what it receives."""
    with PyTarget().running() as running:
        yield running


@pytest.fixture(scope="module")
def pubsub_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Google's Pub/Sub emulator on a free loopback port (skipped where it is not installed)."""
    reason = stack.missing()
    if reason:
        pytest.skip(reason)
    port = stack.free_port()
    service = stack.start_pubsub(port, tmp_path_factory.mktemp("pubsub") / "emulator.log", "p")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        service.stop()
