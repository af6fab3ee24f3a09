"""A continuation carries its producer span through Pub/Sub (Google's emulator): the message's
``googclient_traceparent`` attribute names the ``send`` span, and the delivery that processes it
links to that span (the messaging conventions' producer link)."""

from __future__ import annotations

import uuid

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.http.app import create_app
from consumer.observe import spans, tracing
from consumer.pipeline import continuation
from consumer.service import Service
from consumer.wire.envelopes_out import wrapped_body
from triggers.local import clients

pytestmark = pytest.mark.slow


def test_a_continuation_links_its_processing_to_the_span_that_published_it(
    exported: InMemorySpanExporter,
    pubsub_host: str,
    engine: Engine,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_host)
    monkeypatch.setattr(continuation, "_clients", {})  # not a client of an earlier emulator
    topic = clients.ensure_topic(pubsub_host, "p", "continuations")
    name = f"continuations-{uuid.uuid4().hex[:8]}"  # the emulator serves the module's tests
    subscription = f"projects/p/subscriptions/{name}"
    subscriber = clients.subscriber(pubsub_host)
    subscriber.create_subscription(request={"name": subscription, "topic": topic})
    tracer = spans._tracer
    assert tracer is not None
    with tracer.start_as_current_span("sweep") as sweep:
        assert len(continuation.publish(topic, {"task": "sweep"}, 1, 10.0)) == 1
    (sent,) = [span for span in exported.get_finished_spans() if span.name == "send continuations"]
    assert (
        sent.kind is SpanKind.PRODUCER and sent.parent.span_id == sweep.get_span_context().span_id
    )
    assert sent.attributes["messaging.destination.name"] == "continuations"

    pulled = subscriber.pull(request={"subscription": subscription, "max_messages": 1}, timeout=30)
    attributes = dict(pulled.received_messages[0].message.attributes)
    trace_id, span_id = f"{sent.context.trace_id:032x}", f"{sent.context.span_id:016x}"
    carried = tracing.from_traceparent(attributes[spans.PUBSUB_TRACEPARENT])
    assert carried == tracing.Trace(trace_id, span_id, sampled=True)

    client = create_app(Service.of(settings, engine)).test_client()
    body = wrapped_body(attributes=attributes, subscription=subscription)
    assert client.post("/push", json=body).json["outcome"] == "done"
    (processed,) = [s for s in exported.get_finished_spans() if s.name == f"process {name}"]
    assert [link.context.span_id for link in processed.links] == [sent.context.span_id]
    assert processed.context.trace_id != sent.context.trace_id  # a new delivery, linked
