"""OpenTelemetry traces (``consumer.observe.spans``): off unless an exporter is named, so a
service that exports nothing pays nothing for them."""

from __future__ import annotations

from dataclasses import dataclass

from consumer.config.fields import Rule, Section, named, setting
from consumer.config.parse import whole
from consumer.config.rules import url_problem

EXPORTERS = ("none", "otlp")


@dataclass(frozen=True, repr=False)
class TracingSettings(Section):
    """Spans from publish to effect, exported over OTLP/HTTP (``docs/observability.md``)."""

    traces_exporter: str = setting("none")
    """``otlp`` (OTLP over HTTP, protobuf) or ``none`` (the default: no spans are made)."""
    traces_endpoint: str = setting("")
    """Base URL of the OTLP/HTTP collector (``/v1/traces`` is appended); empty: the exporter's
    own (``OTEL_EXPORTER_OTLP_ENDPOINT``, else ``http://localhost:4318``)."""
    traces_sample_percent: int = setting(100, convert=whole, within=(0, 100))
    """Share of new traces recorded; a push that names a sampled parent is always recorded."""

    @property
    def enabled(self) -> bool:
        return self.traces_exporter != "none"

    def checks(self) -> list[Rule]:
        endpoint = self.traces_endpoint
        return [
            (
                self.traces_exporter in EXPORTERS,
                "CONSUMER_TRACES_EXPORTER must be " + " or ".join(EXPORTERS),
            ),
            named(
                "CONSUMER_TRACES_ENDPOINT",
                url_problem(endpoint) if endpoint else None,
            ),
        ]
