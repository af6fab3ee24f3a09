"""A real ``consumer serve`` process (gunicorn, the production worker) exports its spans over
OTLP/HTTP and over OTLP/gRPC to a real receiver that decodes the protobuf: the push's, the job's
and the target call's spans arrive as one trace with the parent-child and link relations
intact."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from bench.support.otlp_receiver import GrpcReceiver, Receiver
from bench.support.target_servers import PyTarget
from consumer.wire.envelopes_out import tick_body, wrapped_body
from tests.conftest import Server, wait_until

pytestmark = pytest.mark.slow
TRACE = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE}-b7ad6b7169203331-01"
SERVER, CONSUMER, CLIENT = 2, 5, 3
"""``Span.SpanKind`` values of the OTLP protobuf."""


RECEIVERS = {"otlp": Receiver, "otlp-grpc": GrpcReceiver}
"""Each exporter that speaks OTLP, and a receiver of its protocol."""


@pytest.fixture(params=sorted(RECEIVERS))
def exporter(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def receiver(exporter: str) -> Iterator[Receiver | GrpcReceiver]:
    with RECEIVERS[exporter]().running() as running:
        yield running


def test_serve_exports_one_trace_from_push_to_target_call(
    exporter: str,
    receiver: Receiver | GrpcReceiver,
    target: PyTarget,
    sqlite_url: str,
    start_server: Callable[..., Server],
    tmp_path: Path,
) -> None:
    declared = [{"name": "orders", "url": f"{target.url}/orders", "auth": {"type": "none"},
                 "serves": {"job_kind": "process-order"}}]  # fmt: skip
    env = {
        "CONSUMER_DATABASE_URL": sqlite_url, "CONSUMER_LOCAL_MODE": "true",
        "CONSUMER_LOG_LEVEL": "WARNING", "CONSUMER_HTTP_TARGETS": json.dumps(declared),
        "CONSUMER_TRACES_EXPORTER": exporter, "CONSUMER_TRACES_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # the SDK's batch delay: export within 0.1 s
    }  # fmt: skip
    server = start_server(env, workers=1, output=tmp_path / "serve.log")
    job = wrapped_body(b"{}", {"job_kind": "process-order", "job_key": "order-1"})
    pushed = requests.post(f"{server.url}/push", json=job, headers={"traceparent": TRACEPARENT})
    assert pushed.status_code == 200, pushed.text
    swept = requests.post(f"{server.url}/push", json=tick_body("sweep"), timeout=30)
    assert swept.json()["done"] == 1, swept.text

    def arrived() -> bool:  # the sweep's server span ends last, after its response is sent
        return len(receiver.named("POST")) == 1 and len(receiver.named("POST /push")) == 2

    wait_until(arrived, timeout=20, every=0.1)

    pushes = receiver.named("POST /push")
    enqueued = next(span for span in pushes if span.trace_id == TRACE)
    sweep = next(span for span in pushes if span.trace_id != TRACE)
    assert (enqueued.kind, enqueued.parent_span_id) == (SERVER, "b7ad6b7169203331")
    assert enqueued.service == "consumer"
    assert enqueued.attributes["http.response.status_code"] == 200
    handlers = {span.parent_span_id: span for span in receiver.spans if span.kind == CONSUMER}
    enqueue_handler, sweep_handler = handlers[enqueued.span_id], handlers[sweep.span_id]
    (job_span,) = receiver.named("process process-order")
    assert job_span.trace_id == TRACE and job_span.parent_span_id == enqueue_handler.span_id
    assert job_span.links == ((sweep.trace_id, sweep_handler.span_id),)
    (call,) = receiver.named("POST")
    assert (call.kind, call.parent_span_id) == (CLIENT, job_span.span_id)
    assert target.received[0].headers["traceparent"] == f"00-{TRACE}-{call.span_id}-01"
