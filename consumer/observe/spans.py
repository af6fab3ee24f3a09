"""OpenTelemetry spans from publish to effect, named after the semantic conventions for HTTP and
messaging (``docs/observability.md``).

One trace follows the work: the push's server span (parented by its ``traceparent`` or
``X-Cloud-Trace-Context``), the handler's ``process`` span, the trace context stored with every
job it enqueues (``current_traceparent``), the job's ``process`` span (a child of that context,
linked to the sweep that ran it), the call to an HTTP target (a client span whose
``traceparent`` the target receives) and each continuation published (a producer span whose
context travels in the message's ``googclient_traceparent`` attribute, Pub/Sub's own
convention, which the delivery's ``process`` span links to).

Off by default: with no tracer installed every helper returns at once (a shared no-op context
manager, ``None``), so a service that exports nothing pays a function call per step.
While a span is current, log lines name it (``consumer.observe.tracing.current``).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.trace.status import Status, StatusCode

from consumer.observe import tracing

PUBSUB_PREFIX = "googclient_"
"""google-cloud-pubsub's prefix of the trace context it carries in message attributes."""
PUBSUB_TRACEPARENT = PUBSUB_PREFIX + tracing.W3C_HEADER
PROPAGATOR = TraceContextTextMapPropagator()
_NOTHING: AbstractContextManager[None] = nullcontext()
_tracer: trace.Tracer | None = None


def install(tracer: trace.Tracer | None) -> None:
    """Make spans with ``tracer`` from now on (None: make none)."""
    global _tracer
    _tracer = tracer


def enabled() -> bool:
    return _tracer is not None


# --- trace context in and out ------------------------------------------------------------------


def context_of(parent: tracing.Trace | None) -> Context | None:
    """An OpenTelemetry context whose remote parent is ``parent`` (None without a span id)."""
    if parent is None or not parent.span_id:
        return None
    flags = TraceFlags(TraceFlags.SAMPLED if parent.sampled else TraceFlags.DEFAULT)
    remote = SpanContext(int(parent.trace_id, 16), int(parent.span_id, 16), True, flags)
    return trace.set_span_in_context(NonRecordingSpan(remote))


def context_of_traceparent(value: str | None) -> Context | None:
    return context_of(tracing.from_traceparent(value)) if value else None


def current_traceparent() -> str | None:
    """The current span as a ``traceparent`` (stored with a job at enqueue), or None."""
    if _tracer is None:
        return None
    carrier: dict[str, str] = {}
    PROPAGATOR.inject(carrier)
    return carrier.get(tracing.W3C_HEADER)


def inject(headers: MutableMapping[str, str]) -> None:
    """Name the current span as the parent in outgoing HTTP ``headers`` (``traceparent``)."""
    if _tracer is not None:
        PROPAGATOR.inject(headers)


def message_attributes() -> dict[str, str]:
    """Attributes that carry the current span to whoever processes a published message."""
    parent = current_traceparent()
    return {PUBSUB_TRACEPARENT: parent} if parent else {}


def _bind_logs(span: Span) -> Any:
    """Log lines name ``span`` until the returned token is reset."""
    ids = span.get_span_context()
    trace_id, span_id = f"{ids.trace_id:032x}", f"{ids.span_id:016x}"
    return tracing.current.set(tracing.Trace(trace_id, span_id, ids.trace_flags.sampled))


# --- spans --------------------------------------------------------------------------------------


def start_server(method: str, route: str, environ: Mapping[str, Any]) -> Any:
    """Begin the server span of a request (``end_server`` ends it); None when tracing is off."""
    if _tracer is None:
        return None
    parent = context_of(tracing.from_headers(lambda name: environ.get(_ENVIRON[name])))
    name = f"{method} {route}" if route else method  # no route matched: the method alone
    span = _tracer.start_span(
        name, parent, SpanKind.SERVER, _server_attributes(method, route, environ)
    )
    token = otel_context.attach(trace.set_span_in_context(span, parent))
    return span, token, _bind_logs(span)


def end_server(started: Any, status: int | None, error: BaseException | None = None) -> None:
    """End what ``start_server`` began, with the response's status (5xx is an error)."""
    if started is None:
        return
    span, token, logs_token = started
    if status is not None:
        span.set_attribute("http.response.status_code", status)
    if error is not None or (status or 500) >= 500:
        span.set_attribute("error.type", type(error).__qualname__ if error else str(status))
        span.set_status(Status(StatusCode.ERROR))
    span.end()
    otel_context.detach(token)
    tracing.current.reset(logs_token)


def handler_run(key: str, event: Any) -> AbstractContextManager[Span | None]:
    """The ``process`` span of one handler run of a delivered message, linked to the span that
    published it when the message says (``googclient_traceparent``)."""
    if _tracer is None:
        return _NOTHING
    message = getattr(event, "message", None)
    attributes = _message_attributes(message) if message is not None else {}
    subscription = attributes.get("messaging.destination.subscription.name") or str(event.route)
    attributes["consumer.key"] = key
    producer = getattr(message, "attributes", {}).get(PUBSUB_TRACEPARENT)
    links = _links(context_of_traceparent(producer))
    name = f"process {subscription}"
    return _Active(_tracer.start_span(name, None, SpanKind.CONSUMER, attributes, links))


def outcome(span: Span | None, kind: str, error: str | None) -> None:
    """What the handler run came to, on its span."""
    if span is None:
        return
    span.set_attribute("consumer.outcome", kind)
    if error:
        span.set_status(Status(StatusCode.ERROR, error[:200]))


def job_run(job: Any) -> AbstractContextManager[Span | None]:
    """The ``process`` span of one job run: a child of the span that enqueued it (one trace
    from the push to the effect), linked to the sweep that claimed it."""
    if _tracer is None:
        return _NOTHING
    enqueued = context_of_traceparent(getattr(job, "trace_parent", None))
    sweep = trace.get_current_span().get_span_context()
    links = [Link(sweep)] if enqueued is not None and sweep.is_valid else []
    attributes = {
        "messaging.system": "consumer_jobs",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": job.kind,
        "messaging.message.id": str(job.id),
        "consumer.job.attempt": job.attempts,
    }
    span = _tracer.start_span(f"process {job.kind}", enqueued, SpanKind.CONSUMER, attributes, links)
    return _Active(span, bind_logs=True)


def client_call(method: str, url: str) -> AbstractContextManager[Span | None]:
    """The client span of one HTTP request to a target (``answered`` adds its status)."""
    if _tracer is None:
        return _NOTHING
    parts = urlsplit(url)
    attributes: dict[str, Any] = {
        "http.request.method": method,
        "server.address": parts.hostname or "",
        "server.port": parts.port or (443 if parts.scheme == "https" else 80),
        "url.full": parts._replace(query="", fragment="").geturl(),
    }
    return _Active(_tracer.start_span(method, None, SpanKind.CLIENT, attributes))


def answered(span: Span | None, status: int) -> None:
    if span is None:
        return
    span.set_attribute("http.response.status_code", status)
    if status >= 400:
        span.set_attribute("error.type", str(status))
        span.set_status(Status(StatusCode.ERROR))


def failed(span: Span | None, error: BaseException) -> None:
    """A failure that was handled (so no exception ends the span) still marks it."""
    if span is None:
        return
    span.record_exception(error)
    span.set_attribute("error.type", type(error).__qualname__)
    span.set_status(Status(StatusCode.ERROR, str(error)[:200]))


def publishing(topic: str, count: int) -> AbstractContextManager[Span | None]:
    """The producer span of publishing ``count`` messages on ``topic`` (``projects/P/topics/T``)."""
    if _tracer is None:
        return _NOTHING
    attributes: dict[str, Any] = {
        "messaging.system": "gcp_pubsub",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": topic.rsplit("/", 1)[-1],
        "messaging.batch.message_count": count,
    }
    name = f"send {attributes['messaging.destination.name']}"
    return _Active(_tracer.start_span(name, None, SpanKind.PRODUCER, attributes))


class _Active:
    """``span`` current between enter and exit, then ended; an exception leaving it is recorded
    and sets the status to ERROR (what ``start_as_current_span`` does, in fewer calls: this runs
    on every delivery). ``bind_logs``: log lines inside name the span."""

    __slots__ = ("_bind", "_logs", "_token", "span")

    def __init__(self, span: Span, bind_logs: bool = False) -> None:
        self.span, self._bind = span, bind_logs

    def __enter__(self) -> Span:
        self._token = otel_context.attach(trace.set_span_in_context(self.span))
        self._logs = _bind_logs(self.span) if self._bind else None
        return self.span

    def __exit__(self, kind: Any, error: BaseException | None, _traceback: Any) -> None:
        if error is not None:
            self.span.record_exception(error)
            self.span.set_status(Status(StatusCode.ERROR, f"{kind.__name__}: {error}"[:200]))
        self.span.end()
        otel_context.detach(self._token)
        if self._logs is not None:
            tracing.current.reset(self._logs)


# --- attributes ---------------------------------------------------------------------------------

_ENVIRON = {
    name: "HTTP_" + name.upper().replace("-", "_")
    for name in (tracing.W3C_HEADER, tracing.CLOUD_HEADER)
}


def _server_attributes(method: str, route: str, environ: Mapping[str, Any]) -> dict[str, Any]:
    """The conventions' required and conditionally required attributes only: each attribute is
    copied and checked by the SDK, on the request's time."""
    attributes: dict[str, Any] = {
        "http.request.method": method,
        "url.path": environ.get("PATH_INFO", ""),
        "url.scheme": environ.get("wsgi.url_scheme", "http"),
    }
    if route:
        attributes["http.route"] = route
    return attributes


def _message_attributes(message: Any) -> dict[str, Any]:
    """Pub/Sub's messaging attributes of a delivered message."""
    subscription = str(message.subscription or "").rsplit("/", 1)[-1]
    attributes: dict[str, Any] = {
        "messaging.system": "gcp_pubsub",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.message.id": message.message_id,
    }
    if subscription:
        attributes["messaging.destination.subscription.name"] = subscription
    if message.ordering_key:
        attributes["messaging.gcp_pubsub.message.ordering_key"] = message.ordering_key
    if message.delivery_attempt:
        attributes["messaging.gcp_pubsub.message.delivery_attempt"] = message.delivery_attempt
    return attributes


def _links(producer: Context | None) -> list[Link]:
    if producer is None:
        return []
    return [Link(trace.get_current_span(producer).get_span_context())]
