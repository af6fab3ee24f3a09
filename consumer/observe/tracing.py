"""The trace a request belongs to, read from its headers, so every log line it causes can be
correlated in Cloud Logging and Cloud Trace.

Google's load balancer sends ``X-Cloud-Trace-Context: TRACE_ID/SPAN_ID;o=1`` (the span id in
decimal); W3C Trace Context sends ``traceparent: 00-TRACE_ID-SPAN_ID-FLAGS`` (the span id in hex).
``traceparent`` wins when both are valid. Cloud Logging wants the span id as 16 hex digits.
The current request's trace lives in a context variable, set by a ``before_request`` hook and
cleared on teardown, so a log call anywhere in the request needs no argument for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextvars import ContextVar
from typing import NamedTuple

CLOUD_HEADER = "x-cloud-trace-context"
W3C_HEADER = "traceparent"
_CLOUD = re.compile(r"^([0-9a-fA-F]{32})(?:/(\d{1,20}))?(?:;o=([01]))?$")
_W3C = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_NO_TRACE = "0" * 32
_NO_SPAN = "0" * 16


class Trace(NamedTuple):
    trace_id: str
    span_id: str
    """16 lower-case hex digits, or empty when the header named no span."""
    sampled: bool


current: ContextVar[Trace | None] = ContextVar("consumer_trace", default=None)


def from_cloud_header(value: str) -> Trace | None:
    match = _CLOUD.match(value.strip())
    if not match or match.group(1) == _NO_TRACE:
        return None
    trace_id, span, option = match.groups()
    span_id = ""
    if span and 0 < int(span) < 2**64:
        span_id = f"{int(span):016x}"
    return Trace(trace_id.lower(), span_id, option == "1")


def from_traceparent(value: str) -> Trace | None:
    match = _W3C.match(value.strip())
    if not match:
        return None
    version, trace_id, span_id, flags = match.groups()
    if version == "ff" or trace_id == _NO_TRACE or span_id == _NO_SPAN:
        return None
    return Trace(trace_id, span_id, bool(int(flags, 16) & 1))


def from_headers(get: Callable[[str], str | None]) -> Trace | None:
    """The trace named by the headers (``get`` looks one up by lower-case name), if any."""
    parent = get(W3C_HEADER)
    trace = from_traceparent(parent) if parent else None
    if trace is None:
        cloud = get(CLOUD_HEADER)
        trace = from_cloud_header(cloud) if cloud else None
    return trace


def log_fields(trace: Trace | None, project: str) -> dict[str, object]:
    """Cloud Logging's special fields for ``trace``; without a project, the plain trace id."""
    if trace is None:
        return {}
    fields: dict[str, object] = {}
    if project:
        fields["logging.googleapis.com/trace"] = f"projects/{project}/traces/{trace.trace_id}"
    else:
        fields["trace_id"] = trace.trace_id
    if trace.span_id:
        fields["logging.googleapis.com/spanId"] = trace.span_id
    fields["logging.googleapis.com/trace_sampled"] = trace.sampled
    return fields
