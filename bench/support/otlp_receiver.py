"""Small OTLP receivers, as a collector would receive spans: ``Receiver``, a real HTTP server on
loopback that decodes each protobuf ``ExportTraceServiceRequest`` posted to ``/v1/traces``, and
``GrpcReceiver``, a real gRPC server on loopback implementing ``TraceService.Export``. Both keep
the spans of each request the same way (``Spans``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import (
    TraceServiceServicer,
    add_TraceServiceServicer_to_server,
)


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_span_id: str
    links: tuple[tuple[str, str], ...]
    attributes: dict[str, Any]
    service: str


class Spans:
    """Spans received so far (``spans``, unless ``keep`` is false: a benchmark's sink counts
    them only, so that the receiver's own decoding does not weigh on the traced server it shares
    the machine with), how many (``count``), and how many export requests brought them."""

    def __init__(self, keep: bool = True) -> None:
        self.spans: list[ReceivedSpan] = []
        self.count = 0
        self.requests = 0
        self.keep = keep
        self.lock = threading.Lock()

    def add(self, request: ExportTraceServiceRequest) -> None:
        with self.lock:
            self.requests += 1
            for resource_spans in request.resource_spans:
                service = _service(resource_spans.resource)
                for scope_spans in resource_spans.scope_spans:
                    self.count += len(scope_spans.spans)
                    if self.keep:
                        self.spans.extend(_span(span, service) for span in scope_spans.spans)

    def named(self, name: str) -> list[ReceivedSpan]:
        with self.lock:
            return [span for span in self.spans if span.name == name]


class Receiver(Spans):
    """OTLP/HTTP (protobuf) on ``url`` (append ``/v1/traces``)."""

    def __init__(self, keep: bool = True) -> None:
        super().__init__(keep)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != "/v1/traces" or "protobuf" not in self.headers["Content-Type"]:
                    self.send_error(404)
                    return
                receiver.add(ExportTraceServiceRequest.FromString(body))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    @contextmanager
    def running(self) -> Iterator[Receiver]:
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()


class GrpcReceiver(Spans):
    """OTLP/gRPC (``TraceService.Export``), plaintext, on ``url`` (``http://127.0.0.1:PORT``)."""

    def __init__(self) -> None:
        super().__init__()
        receiver = self

        class Service(TraceServiceServicer):
            def Export(self, request: ExportTraceServiceRequest, context: Any) -> Any:
                receiver.add(request)
                return ExportTraceServiceResponse()

        self.server = grpc.server(ThreadPoolExecutor(max_workers=2))
        add_TraceServiceServicer_to_server(Service(), self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.url = f"http://127.0.0.1:{port}"

    @contextmanager
    def running(self) -> Iterator[GrpcReceiver]:
        self.server.start()
        try:
            yield self
        finally:
            self.server.stop(grace=None).wait()


def _service(resource: Any) -> str:
    for attribute in resource.attributes:
        if attribute.key == "service.name":
            return str(attribute.value.string_value)
    return ""


def _span(span: Any, service: str) -> ReceivedSpan:
    attributes = {a.key: _value(a.value) for a in span.attributes}
    links = tuple((link.trace_id.hex(), link.span_id.hex()) for link in span.links)
    return ReceivedSpan(
        span.name, span.kind, span.trace_id.hex(), span.span_id.hex(),
        span.parent_span_id.hex(), links, attributes, service,
    )  # fmt: skip


def _value(value: Any) -> Any:
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None
