"""OpenTelemetry traces (``consumer.observe.spans``): off unless an exporter is named, so a
service that exports nothing pays nothing for them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from consumer.config.fields import Rule, Section, named, setting
from consumer.config.parse import whole
from consumer.config.rules import url_problem

EXPORTERS = ("none", "otlp", "otlp-grpc", "gcp")
ENDPOINT_EXPORTERS = ("otlp", "otlp-grpc")
PROJECT_ID = re.compile(r"(?:[a-z][a-z0-9.-]*:)?[a-z][a-z0-9-]{4,28}[a-z0-9]")
"""A Google Cloud project id: 6 to 30 lower-case letters, digits and hyphens, a letter first
(an old project may carry a ``domain:`` prefix)."""


@dataclass(frozen=True, repr=False)
class TracingSettings(Section):
    """Spans from publish to effect, exported over OTLP or to Cloud Trace
    (``docs/observability.md``)."""

    traces_exporter: str = setting("none")
    """``otlp`` (OTLP over HTTP, protobuf), ``otlp-grpc`` (OTLP over gRPC), ``gcp`` (Google
    Cloud Trace) or ``none`` (the default: no spans are made)."""
    traces_endpoint: str = setting("")
    """Where ``otlp`` and ``otlp-grpc`` send: ``otlp``, the collector's base URL (``/v1/traces``
    is appended); ``otlp-grpc``, its ``host:port`` as a URL, ``http://`` for plaintext and
    ``https://`` for TLS. Empty: the exporter's own (``OTEL_EXPORTER_OTLP_ENDPOINT``, else
    ``http://localhost:4318``, ``http://localhost:4317`` for gRPC)."""
    traces_project: str = setting("")
    """Google Cloud project the ``gcp`` exporter writes spans to; empty: the project of the
    application default credentials (``google.auth.default()``)."""
    traces_sample_percent: int = setting(100, convert=whole, within=(0, 100))
    """Share of new traces recorded; a push that names a sampled parent is always recorded."""

    @property
    def enabled(self) -> bool:
        return self.traces_exporter != "none"

    def checks(self) -> list[Rule]:
        exporter, endpoint, project = (
            self.traces_exporter, self.traces_endpoint, self.traces_project
        )  # fmt: skip
        return [
            (exporter in EXPORTERS, "CONSUMER_TRACES_EXPORTER must be " + ", ".join(EXPORTERS)),
            named("CONSUMER_TRACES_ENDPOINT", url_problem(endpoint) if endpoint else None),
            (
                not endpoint or exporter != "gcp",
                f"CONSUMER_TRACES_ENDPOINT is for otlp and otlp-grpc, not {exporter}",
            ),
            (
                not project or exporter not in ENDPOINT_EXPORTERS,
                f"CONSUMER_TRACES_PROJECT is for the gcp exporter, not {exporter}",
            ),
            (
                not project or PROJECT_ID.fullmatch(project) is not None,
                "CONSUMER_TRACES_PROJECT must be a project id (6-30 of a-z, 0-9 and -)",
            ),
        ]
