"""Where spans go: the OpenTelemetry SDK with a batching OTLP/HTTP exporter, set up once per
process (after gunicorn forks: the exporter's thread does not survive a fork) from the tracing
settings (``consumer.config.tracing``). Spans are exported in the background, never on the
request's time; at exit the last batch is flushed.

The SDK and the exporter are imported only when tracing is on: together they take about 0.2 s
to import (protobuf), which a process that exports nothing, or a CLI command, never pays.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from consumer.config.tracing import TracingSettings
from consumer.observe import spans

SERVICE_NAME = "consumer"
TRACES_PATH = "/v1/traces"
_lock = threading.Lock()
_installed: dict[int, tuple[TracingSettings, Any]] = {}


def configure(settings: TracingSettings) -> Any:
    """Export spans as ``settings`` say, once per process; nothing when tracing is off.
    Returns the SDK's ``TracerProvider`` (None when off)."""
    if not settings.enabled:
        return None
    with _lock:
        found = _installed.get(os.getpid())
        if found is not None and found[0] == settings:
            return found[1]
        provider = provider_for(settings, exporter_for(settings))
        _installed[os.getpid()] = (settings, provider)
    spans.install(provider.get_tracer("consumer"))
    return provider


def exporter_for(settings: TracingSettings) -> Any:
    """The OTLP/HTTP (protobuf) exporter to ``traces_endpoint`` (or the exporter's default)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    endpoint = settings.traces_endpoint.rstrip("/")
    return OTLPSpanExporter(endpoint=endpoint + TRACES_PATH if endpoint else None)


def provider_for(settings: TracingSettings, exporter: Any) -> Any:
    """A provider that samples ``traces_sample_percent`` of new traces (and follows a sampled
    parent) and exports through ``exporter`` in batches."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased

    percent = settings.traces_sample_percent
    sampler = ParentBased(ALWAYS_ON if percent == 100 else TraceIdRatioBased(percent / 100))
    resource = Resource.create({"service.name": SERVICE_NAME})
    provider = TracerProvider(sampler=sampler, resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider
