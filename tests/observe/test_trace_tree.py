"""One trace from publish to effect, asserted span by span with the SDK's in-memory exporter:
a push that enqueues a job (its traceparent the publisher's), the sweep tick that runs it, the
job's call to a real HTTP target, and the traceparent the target receives."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from flask.testing import FlaskClient
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from bench.support.target_servers import PyTarget, Reply
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.errors import SettingsError
from consumer.http.app import create_app
from consumer.jobs.store import enqueue
from consumer.observe import spans, tracing
from consumer.service import compose
from consumer.wire.envelopes_out import tick_body, wrapped_body
from tests.conftest import server_env

PUBLISHER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PUBLISHER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{PUBLISHER_TRACE}-{PUBLISHER_SPAN}-01"


def client_for(database_url: str, target_url: str) -> FlaskClient:
    declared = [{"name": "orders", "url": f"{target_url}/orders", "auth": {"type": "none"},
                 "serves": {"job_kind": "process-order"}}]  # fmt: skip
    env = {
        "CONSUMER_DATABASE_URL": database_url, "CONSUMER_LOCAL_MODE": "true",
        "CONSUMER_HTTP_TARGETS": json.dumps(declared),
    }  # fmt: skip
    return create_app(compose(env)).test_client()


def by_name(finished: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    found = [span for span in finished if span.name == name]
    assert len(found) == 1, [span.name for span in finished]
    return found[0]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent else None


def test_push_job_and_target_call_are_one_trace(
    exported: InMemorySpanExporter, database_url: str, target: PyTarget
) -> None:
    client = client_for(database_url, target.url)
    job = wrapped_body(b'{"order": 7}', {"job_kind": "process-order", "job_key": "order-7"})
    answer = client.post("/push", json=job, headers={"traceparent": TRACEPARENT})
    assert answer.status_code == 200, answer.json
    swept = client.post("/push", json=tick_body("sweep"))
    assert swept.json["done"] == 1, swept.json

    finished = exported.get_finished_spans()
    enqueued, sweep = [s for s in finished if s.name == "POST /push"]
    process_job = by_name(finished, "process process-order")
    call = by_name(finished, "POST")
    handlers = [s for s in finished if s.name.startswith("process ") and s is not process_job]
    enqueue_handler, sweep_handler = handlers

    # the push continues the publisher's trace; its handler is a child of its server span
    assert enqueued.kind is SpanKind.SERVER
    assert f"{enqueued.context.trace_id:032x}" == PUBLISHER_TRACE
    assert parent_id(enqueued) == int(PUBLISHER_SPAN, 16) and enqueued.parent.is_remote
    assert enqueued.attributes["http.route"] == "/push"
    assert enqueued.attributes["http.response.status_code"] == 200
    assert enqueue_handler.kind is SpanKind.CONSUMER
    assert parent_id(enqueue_handler) == enqueued.context.span_id
    assert enqueue_handler.attributes["messaging.system"] == "gcp_pubsub"
    assert enqueue_handler.attributes["consumer.outcome"] == "done"

    # the job runs under the sweep's delivery, yet is a child of the handler that enqueued it,
    # and linked to the sweep that ran it
    assert sweep.context.trace_id != enqueued.context.trace_id
    assert parent_id(sweep_handler) == sweep.context.span_id
    assert process_job.context.trace_id == enqueued.context.trace_id
    assert parent_id(process_job) == enqueue_handler.context.span_id
    assert [link.context.span_id for link in process_job.links] == [sweep_handler.context.span_id]
    assert process_job.attributes["messaging.destination.name"] == "process-order"

    # the target call is a client span under the job; the target is told that span's id
    assert call.kind is SpanKind.CLIENT
    assert parent_id(call) == process_job.context.span_id
    assert call.attributes["http.response.status_code"] == 200
    assert call.attributes["url.full"] == f"{target.url}/orders"
    received = tracing.from_traceparent(target.received[0].headers["traceparent"])
    assert received is not None
    assert (received.trace_id, received.span_id) == (
        PUBLISHER_TRACE,
        f"{call.context.span_id:016x}",
    )


def test_a_job_enqueued_outside_any_span_runs_as_a_child_of_the_sweep_and_a_failed_call_shows(
    exported: InMemorySpanExporter, database_url: str, target: PyTarget
) -> None:
    target.replies = [Reply(status=503, body=b"{}")]
    client = client_for(database_url, target.url)
    engine = make_engine(database_url)
    enqueue(engine, "process-order", {}, kinds=["process-order"])
    engine.dispose()
    assert client.post("/push", json=tick_body("sweep")).json["retried"] == 1
    finished = exported.get_finished_spans()
    call, job_span = by_name(finished, "POST"), by_name(finished, "process process-order")
    sweep_handler = by_name(finished, "process consumer-push")
    assert parent_id(job_span) == sweep_handler.context.span_id and job_span.links == ()
    assert call.attributes["http.response.status_code"] == 503
    assert call.attributes["error.type"] == "503"
    assert not job_span.status.is_ok
    assert job_span.events[0].name == "exception"  # the Retryable the failure became


def test_without_a_tracer_nothing_is_recorded_and_no_traceparent_is_stored(
    database_url: str, target: PyTarget
) -> None:
    assert not spans.enabled()
    client = client_for(database_url, target.url)
    job = wrapped_body(b"{}", {"job_kind": "process-order", "job_key": "order-9"})
    assert client.post("/push", json=job).status_code == 200
    assert spans.current_traceparent() is None
    assert client.post("/push", json=tick_body("sweep")).json["done"] == 1
    assert "traceparent" not in target.received[0].headers


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        (
            {"CONSUMER_TRACES_EXPORTER": "zipkin"},
            "CONSUMER_TRACES_EXPORTER must be none, otlp, otlp-grpc, gcp",
        ),
        ({"CONSUMER_TRACES_ENDPOINT": "ftp://collector"}, "CONSUMER_TRACES_ENDPOINT"),
        (
            {"CONSUMER_TRACES_EXPORTER": "otlp-grpc", "CONSUMER_TRACES_ENDPOINT": "collector:4317"},
            "CONSUMER_TRACES_ENDPOINT: must be an http",
        ),
        (
            {"CONSUMER_TRACES_EXPORTER": "gcp", "CONSUMER_TRACES_ENDPOINT": "https://c.example"},
            "CONSUMER_TRACES_ENDPOINT is for otlp and otlp-grpc, not gcp",
        ),
        (
            {"CONSUMER_TRACES_EXPORTER": "otlp", "CONSUMER_TRACES_PROJECT": "acme-traces"},
            "CONSUMER_TRACES_PROJECT is for the gcp exporter, not otlp",
        ),
        (
            {"CONSUMER_TRACES_EXPORTER": "gcp", "CONSUMER_TRACES_PROJECT": "Acme Traces"},
            "CONSUMER_TRACES_PROJECT must be a project id",
        ),
        (
            {"CONSUMER_TRACES_SAMPLE_PERCENT": "101"},
            "CONSUMER_TRACES_SAMPLE_PERCENT must be 0..100",
        ),
    ],
)
def test_bad_tracing_settings_are_refused_by_name(env: dict[str, str], problem: str) -> None:
    with pytest.raises(SettingsError, match=problem) as refused:
        Settings.from_env({"CONSUMER_LOCAL_MODE": "true", **env})
    assert ";" not in str(refused.value)  # that one problem alone


@pytest.mark.parametrize(
    "env",
    [
        {"CONSUMER_TRACES_EXPORTER": "otlp-grpc", "CONSUMER_TRACES_ENDPOINT": "https://c:4317"},
        {"CONSUMER_TRACES_EXPORTER": "gcp", "CONSUMER_TRACES_PROJECT": "acme-traces"},
        {"CONSUMER_TRACES_EXPORTER": "gcp", "CONSUMER_TRACES_PROJECT": "example.com:acme-traces"},
        {"CONSUMER_TRACES_EXPORTER": "none", "CONSUMER_TRACES_ENDPOINT": "http://c:4318"},
    ],
)
def test_each_exporter_s_own_settings_are_accepted(env: dict[str, str]) -> None:
    tracing = Settings.from_env({"CONSUMER_LOCAL_MODE": "true", **env}).tracing
    assert tracing.traces_exporter == env["CONSUMER_TRACES_EXPORTER"]


def test_a_service_that_exports_nothing_imports_no_sdk_and_no_exporter(sqlite_url: str) -> None:
    """The SDK, the exporters and their gRPC clients are imported only when tracing is on."""
    program = (
        "import sys\n"
        "from consumer.http.wsgi import asgi\n"
        "asgi()\n"
        "heavy = ('opentelemetry.sdk', 'opentelemetry.exporter', 'google.cloud.trace_v2')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    env = server_env({"CONSUMER_DATABASE_URL": sqlite_url, "CONSUMER_LOCAL_MODE": "true"})
    ran = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]", ran.stdout
