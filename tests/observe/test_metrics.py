"""Every decision is counted by route, outcome and status, and exposed at /metrics."""

from __future__ import annotations

from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.http.app import create_app
from consumer.service import Service
from consumer.wire.envelopes_out import tick_body, wrapped_body


def decisions(client: FlaskClient, **labels: str) -> float:
    text = client.get("/metrics").get_data(as_text=True)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "consumer_push_decisions_total" and all(
                sample.labels.get(k) == v for k, v in labels.items()
            ):
                return float(sample.value)
    return 0.0


def test_decisions_are_counted_by_route_and_outcome(settings: Settings, engine: Engine) -> None:
    client = create_app(Service.of(settings, engine)).test_client()
    done = {"route": "tick", "outcome": "done", "status": "200"}
    duplicate = {"route": "tick", "outcome": "duplicate", "status": "200"}
    rejected = {"route": "-", "outcome": "rejected", "status": "400"}
    before = [decisions(client, **labels) for labels in (done, duplicate, rejected)]
    body = tick_body("cleanup")
    client.post("/push", json=body)
    client.post("/push", json=body)
    client.post("/push", json=body)
    client.post("/push", data=b"nope")
    client.post("/push", json=wrapped_body())
    after = [decisions(client, **labels) for labels in (done, duplicate, rejected)]
    assert [b - a for a, b in zip(before, after, strict=True)] == [1, 2, 1]
