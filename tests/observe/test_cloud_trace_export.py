"""The ``gcp`` exporter (Cloud Trace). Google's endpoint is out of reach, so the exporter is built
as the service builds it (the real client, from application default credentials written to a
file) and checked for its project; and the spans of a real push, sweep and target call go
through the exporter's own translation into the ``BatchWriteSpans`` request it would send
(a client that keeps the request's wire bytes instead of sending them): each span is named
``projects/P/traces/T/spans/S`` and keeps its ids, its parent and its links. A push that came
through Google's load balancer (``X-Cloud-Trace-Context``, its span id in decimal) stays in the
load balancer's trace, under its span."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.cloud.trace_v2 import BatchWriteSpansRequest, TraceServiceClient
from google.cloud.trace_v2.types import Span as CloudSpan

from bench.support.target_servers import PyTarget
from consumer.config.tracing import TracingSettings
from consumer.errors import SettingsError
from consumer.observe import exporting, spans
from consumer.wire.envelopes_out import tick_body, wrapped_body
from tests.cli.test_startup_faults import assert_one_line, run, server_command
from tests.conftest import free_port, server_env
from tests.observe.test_trace_tree import client_for

PROJECT = "acme-traces"
CREDENTIALS_PROJECT = "acme-credentials"
LB_TRACE = "105445aa7843bc8bf206b12000100000"
LB_SPAN = 1234567890123456789
"""The load balancer's span, in decimal as ``X-Cloud-Trace-Context`` carries it."""


class Recording:
    """A ``TraceServiceClient`` stand-in: each ``BatchWriteSpans`` request, as its wire bytes
    decode."""

    def __init__(self) -> None:
        self.requests: list[BatchWriteSpansRequest] = []

    def batch_write_spans(self, request: BatchWriteSpansRequest, **_: Any) -> None:
        wire = BatchWriteSpansRequest.serialize(request)
        self.requests.append(BatchWriteSpansRequest.deserialize(wire))


@pytest.fixture
def credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where application default credentials are looked for: only the file this returns (to be
    written by the test), never the runner's gcloud, environment or metadata server."""
    for name in ("GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "OTEL_EXPORTER_GCP_TRACE_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "credentials.json"
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    return path


def service_account(project: str) -> dict[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return {
        "type": "service_account", "project_id": project, "private_key_id": "1",
        "private_key": pem.decode(), "client_email": f"consumer@{project}.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": "https://oauth2.googleapis.com/token",
    }  # fmt: skip


USER = {"type": "authorized_user", "client_id": "c", "client_secret": "s", "refresh_token": "r"}
"""A user's credentials: they name no project."""


@pytest.mark.parametrize(("project", "expected"), [(PROJECT, PROJECT), ("", CREDENTIALS_PROJECT)])
def test_the_exporter_writes_into_the_setting_s_project_else_the_credentials(
    credentials: Path, project: str, expected: str
) -> None:
    credentials.write_text(json.dumps(service_account(CREDENTIALS_PROJECT)))
    settings = TracingSettings(traces_exporter="gcp", traces_project=project)
    exporting.check(settings)
    exporter = exporting.exporter_for(settings)
    assert type(exporter).__name__ == "CloudTraceSpanExporter"
    assert exporter.project_id == expected
    assert isinstance(exporter.client, TraceServiceClient)


def test_credentials_that_name_no_project_are_refused_by_name(credentials: Path) -> None:
    credentials.write_text(json.dumps(USER))
    with pytest.raises(SettingsError, match=r"^CONSUMER_TRACES_PROJECT must be set"):
        exporting.check(TracingSettings(traces_exporter="gcp"))


def test_no_credentials_are_refused_by_name(credentials: Path) -> None:
    with pytest.raises(SettingsError, match=r"^CONSUMER_TRACES_EXPORTER=gcp needs Google cred"):
        exporting.check(TracingSettings(traces_exporter="gcp"))


@pytest.mark.slow
@pytest.mark.parametrize("server", ["consumer serve", "container command"])
def test_a_server_without_a_trace_project_does_not_start(
    credentials: Path, tmp_path: Path, server: str
) -> None:
    """One line, exit 2, from the master, before any worker (the database is never reached)."""
    credentials.write_text(json.dumps(USER))
    bind = f"127.0.0.1:{free_port()}"
    env = server_env({
        "CONSUMER_DATABASE_URL": f"sqlite:///{tmp_path / 'never-reached.db'}",
        "CONSUMER_PUSH_TOKEN": "t" * 32, "CONSUMER_BIND": bind,
        "CONSUMER_TRACES_EXPORTER": "gcp",
    })  # fmt: skip
    assert_one_line(
        run(server_command(server, bind), env, tmp_path), "CONSUMER_TRACES_PROJECT must be set"
    )


@pytest.fixture
def recording() -> Iterator[tuple[Recording, Any]]:
    """The service's provider exporting through the Cloud Trace exporter into ``Recording``."""
    client = Recording()
    settings = TracingSettings(traces_exporter="gcp", traces_project=PROJECT)
    exporter = exporting.cloud_trace_exporter(settings, client=client)
    provider = exporting.provider_for(settings, exporter)
    spans.install(provider.get_tracer("tests"))
    yield client, provider
    spans.install(None)
    provider.shutdown()


def test_spans_keep_their_ids_parents_and_links_in_cloud_trace_s_request(
    recording: tuple[Recording, Any], sqlite_url: str, target: PyTarget
) -> None:
    client, provider = recording
    app = client_for(sqlite_url, target.url)
    job = wrapped_body(b"{}", {"job_kind": "process-order", "job_key": "order-1"})
    lb_header = {"X-Cloud-Trace-Context": f"{LB_TRACE}/{LB_SPAN};o=1"}
    assert app.post("/push", json=job, headers=lb_header).status_code == 200
    assert app.post("/push", json=tick_body("sweep")).json["done"] == 1
    assert provider.force_flush()

    assert {request.name for request in client.requests} == {f"projects/{PROJECT}"}
    written = [span for request in client.requests for span in request.spans]
    ids = {span.span_id: span for span in written}
    for span in written:
        trace = span.name.split("/")[3]
        assert span.name == f"projects/{PROJECT}/traces/{trace}/spans/{span.span_id}"

    def named(name: str) -> list[CloudSpan]:
        return [span for span in written if span.display_name.value == name]

    def trace_of(span: CloudSpan) -> str:
        return span.name.split("/")[3]

    enqueued, sweep = sorted(named("POST /push"), key=lambda span: trace_of(span) != LB_TRACE)
    assert trace_of(enqueued) == LB_TRACE and enqueued.parent_span_id == f"{LB_SPAN:016x}"
    assert enqueued.span_kind == CloudSpan.SpanKind.SERVER
    assert enqueued.attributes.attribute_map["/http/route"].string_value.value == "/push"
    handler = next(s for s in written if s.parent_span_id == enqueued.span_id)
    sweep_handler = next(s for s in written if s.parent_span_id == sweep.span_id)
    (job_span,) = named("process process-order")
    assert trace_of(job_span) == LB_TRACE and ids[job_span.parent_span_id] is handler
    (link,) = job_span.links.link
    assert (link.trace_id, link.span_id) == (trace_of(sweep), sweep_handler.span_id)
    (call,) = named("POST")
    assert call.span_kind == CloudSpan.SpanKind.CLIENT and call.parent_span_id == job_span.span_id
    traceparent = target.received[0].headers["traceparent"]
    assert traceparent == f"00-{LB_TRACE}-{call.span_id}-01"
