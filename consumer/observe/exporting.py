"""Where spans go: the OpenTelemetry SDK with a batching exporter, set up once per process (after
gunicorn forks: the exporter's thread, and a gRPC channel, do not survive a fork) from the
tracing settings (``consumer.config.tracing``). Spans are exported in the background, never on
the request's time; at exit the last batch is flushed.

| ``CONSUMER_TRACES_EXPORTER`` | exporter |
|---|---|
| ``otlp`` | OTLP over HTTP (protobuf) to ``CONSUMER_TRACES_ENDPOINT`` + ``/v1/traces`` |
| ``otlp-grpc`` | OTLP over gRPC to ``CONSUMER_TRACES_ENDPOINT`` (``http://``: plaintext) |
| ``gcp`` | Cloud Trace's ``BatchWriteSpans``, into ``CONSUMER_TRACES_PROJECT`` |

The SDK and the exporters are imported only when tracing is on: together they take about 0.2 s
to import (protobuf, gRPC), which a process that exports nothing, or a CLI command, never pays.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

import google.auth
from google.auth.exceptions import DefaultCredentialsError

from consumer.config.tracing import TracingSettings
from consumer.errors import SettingsError
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


def check(settings: TracingSettings) -> None:
    """What the settings alone cannot tell, checked before a server forks its workers: the
    ``gcp`` exporter must find its project. Raises ``SettingsError`` naming the variable."""
    if settings.traces_exporter == "gcp":
        gcp_project(settings)


def exporter_for(settings: TracingSettings) -> Any:
    """The exporter ``traces_exporter`` names."""
    return _EXPORTERS[settings.traces_exporter](settings)


def otlp_http_exporter(settings: TracingSettings) -> Any:
    """OTLP/HTTP (protobuf) to ``traces_endpoint`` + ``/v1/traces`` (or the exporter's default)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    endpoint = settings.traces_endpoint.rstrip("/")
    return OTLPSpanExporter(endpoint=endpoint + TRACES_PATH if endpoint else None)


def otlp_grpc_exporter(settings: TracingSettings) -> Any:
    """OTLP/gRPC to ``traces_endpoint``: plaintext for ``http://``, TLS for ``https://`` (empty:
    the exporter's default and its ``OTEL_EXPORTER_OTLP_INSECURE``)."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    endpoint = settings.traces_endpoint
    if not endpoint:
        return OTLPSpanExporter()
    return OTLPSpanExporter(endpoint=endpoint, insecure=endpoint.startswith("http://"))


def cloud_trace_exporter(settings: TracingSettings, client: Any = None) -> Any:
    """Cloud Trace (``BatchWriteSpans`` over gRPC, with the application default credentials)
    into ``gcp_project``. ``client``: a ``TraceServiceClient`` of one's own."""
    from opentelemetry.exporter.cloud_trace import CloudTraceSpanExporter

    project = gcp_project(settings)
    # The exporter is marked deprecated in favour of Cloud Trace's OTLP endpoint; it still
    # writes through the Cloud Trace API, which is what this exporter is chosen for.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return CloudTraceSpanExporter(project_id=project, client=client)


def gcp_project(settings: TracingSettings) -> str:
    """``traces_project``, else the project of the application default credentials."""
    if settings.traces_project:
        return settings.traces_project
    try:
        _, project = google.auth.default()
    except DefaultCredentialsError as error:
        found = str(error).splitlines()[0] if str(error) else type(error).__name__
        needs = f"CONSUMER_TRACES_EXPORTER=gcp needs Google credentials: {found}"
        raise SettingsError(needs) from None
    if not project:
        raise SettingsError(
            "CONSUMER_TRACES_PROJECT must be set: the Google credentials name no project"
        )
    return str(project)


_EXPORTERS: dict[str, Callable[[TracingSettings], Any]] = {
    "otlp": otlp_http_exporter,
    "otlp-grpc": otlp_grpc_exporter,
    "gcp": cloud_trace_exporter,
}


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
