"""Prometheus metrics: one counter and one histogram per decision, by route and outcome.

Under gunicorn set ``PROMETHEUS_MULTIPROC_DIR`` so every worker's numbers are summed.
"""

from __future__ import annotations

import os

from flask import Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)

from consumer.outcomes import Outcome

DECISIONS = Counter(
    "consumer_push_decisions_total",
    "Push requests by route, outcome and HTTP status",
    ["route", "outcome", "status"],
)
DURATION = Histogram("consumer_push_seconds", "Time to decide a push request", ["outcome"])


def record(outcome: Outcome, seconds: float) -> None:
    DECISIONS.labels(outcome.route, outcome.kind.value, str(outcome.http_status)).inc()
    DURATION.labels(outcome.kind.value).observe(seconds)


def view() -> Response:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        payload = generate_latest(registry)
    else:
        payload = generate_latest()
    return Response(payload, mimetype=CONTENT_TYPE_LATEST)
