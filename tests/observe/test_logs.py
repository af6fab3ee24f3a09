"""Log lines: JSON with time, severity and message; a request's lines carry its trace
(X-Cloud-Trace-Context or W3C traceparent); text for a person at a terminal."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import datetime

import pytest
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.http.app import create_app
from consumer.http.routes import access_patterns
from consumer.observe import tracing
from consumer.observe.logs import JsonFormatter, SkipDecidedRequests, TextFormatter, resolve_format
from consumer.observe.tracing import Trace
from consumer.service import Service
from consumer.wire.envelopes_out import tick_body

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACE_FIELD = "logging.googleapis.com/trace"
SPAN_FIELD = "logging.googleapis.com/spanId"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (f"{TRACE}/1;o=1", Trace(TRACE, "0000000000000001", True)),
        (f"{TRACE}/12345678901234567890;o=0", Trace(TRACE, "ab54a98ceb1f0ad2", False)),
        (f"{TRACE.upper()}/255", Trace(TRACE, "00000000000000ff", False)),
        (TRACE, Trace(TRACE, "", False)),
        ("0" * 32 + "/1;o=1", None),
        ("not-a-trace/1", None),
        (f"{TRACE}/99999999999999999999;o=1", Trace(TRACE, "", True)),  # span over 64 bits
    ],
)
def test_cloud_trace_header(value: str, expected: Trace | None) -> None:
    assert tracing.from_cloud_header(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (f"00-{TRACE}-00f067aa0ba902b7-01", Trace(TRACE, "00f067aa0ba902b7", True)),
        (f"00-{TRACE}-00f067aa0ba902b7-00", Trace(TRACE, "00f067aa0ba902b7", False)),
        (f"00-{'0' * 32}-00f067aa0ba902b7-01", None),
        (f"00-{TRACE}-{'0' * 16}-01", None),
        (f"ff-{TRACE}-00f067aa0ba902b7-01", None),
        (f"00-{TRACE.upper()}-00f067aa0ba902b7-01", None),  # the spec says lower-case hex
        ("00-abc-def-01", None),
    ],
)
def test_traceparent(value: str, expected: Trace | None) -> None:
    assert tracing.from_traceparent(value) == expected


def test_traceparent_wins_over_the_cloud_header() -> None:
    headers = {"traceparent": f"00-{'a' * 32}-{'b' * 16}-01", "x-cloud-trace-context": f"{TRACE}/1"}
    assert tracing.from_headers(headers.get) == Trace("a" * 32, "b" * 16, True)
    headers["traceparent"] = "garbage"
    assert tracing.from_headers(headers.get) == Trace(TRACE, "0000000000000001", False)


def record(message: str = "hello", **extra: object) -> logging.LogRecord:
    entry = logging.LogRecord("consumer.test", logging.WARNING, __file__, 1, message, None, None)
    entry.__dict__.update(extra)
    return entry


def test_a_json_line_has_time_severity_message_and_the_extras() -> None:
    line = json.loads(JsonFormatter().format(record("hi", key="tick:sweep", status=200)))
    assert datetime.fromisoformat(line["time"]).utcoffset() is not None
    assert line["time"].endswith("Z")
    assert (line["severity"], line["message"], line["logger"]) == ("WARNING", "hi", "consumer.test")
    assert (line["key"], line["status"]) == ("tick:sweep", 200)
    assert TRACE_FIELD not in line


def test_the_current_trace_is_named_with_the_project() -> None:
    token = tracing.current.set(Trace(TRACE, "00f067aa0ba902b7", True))
    try:
        with_project = json.loads(JsonFormatter("acme").format(record()))
        without = json.loads(JsonFormatter("").format(record()))
    finally:
        tracing.current.reset(token)
    assert with_project[TRACE_FIELD] == f"projects/acme/traces/{TRACE}"
    assert with_project[SPAN_FIELD] == "00f067aa0ba902b7"
    assert with_project["logging.googleapis.com/trace_sampled"] is True
    assert without["trace_id"] == TRACE and TRACE_FIELD not in without


def test_text_for_a_terminal_json_otherwise() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert resolve_format("auto", Tty()) == "text"
    assert resolve_format("auto", io.StringIO()) == "json"
    assert resolve_format("json", Tty()) == "json"
    line = TextFormatter().format(record("decided", outcome="done"))
    assert "WARNING" in line and "decided" in line and "outcome=done" in line
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


@pytest.fixture
def app_lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter("acme"))
    logger = logging.getLogger("consumer")
    saved = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(saved[0])
    logger.propagate = saved[1]


def test_a_push_writes_one_line_carrying_its_trace(
    settings: Settings, engine: Engine, app_lines: io.StringIO
) -> None:
    client = create_app(Service.of(settings.with_values(project_id="acme"), engine)).test_client()
    headers = {"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"}
    assert client.post("/push", json=tick_body("cleanup"), headers=headers).status_code == 200
    assert client.post("/push", json=tick_body("cleanup")).status_code == 200
    lines = [json.loads(line) for line in app_lines.getvalue().splitlines()]
    decisions = [line for line in lines if line["message"] == "decided"]
    assert len(decisions) == 2, lines
    assert decisions[0][TRACE_FIELD] == f"projects/acme/traces/{TRACE}"
    assert decisions[0][SPAN_FIELD] == "00f067aa0ba902b7"
    assert TRACE_FIELD not in decisions[1]  # the next request's lines do not inherit it
    assert tracing.current.get() is None


def access(method: str, path: str, status: str) -> logging.LogRecord:
    atoms = {"m": method, "U": path, "s": status, "h": "10.0.0.1", "L": "0.01", "B": 12}
    return logging.LogRecord("gunicorn.access", logging.INFO, __file__, 1, "%(m)s", (atoms,), None)


@pytest.mark.parametrize(
    ("method", "path", "status", "kept"),
    [
        ("POST", "/push", "200", False),  # the decision line says it all
        ("POST", "/hooks/deploy", "401", False),
        ("POST", "/ticks/sweep", "200", False),  # a row of the route table like any other
        ("POST", "/ticks/", "404", True),
        ("GET", "/healthz", "200", False),  # a probe every few seconds
        ("GET", "/metrics", "200", False),
        ("GET", "/readyz", "503", True),  # a failing probe is news
        ("GET", "/push", "405", True),
        ("GET", "/openapi.yaml", "200", True),
    ],
)
def test_access_lines_kept(method: str, path: str, status: str, kept: bool) -> None:
    assert SkipDecidedRequests(**access_patterns()).filter(access(method, path, status)) is kept


def test_an_access_line_has_the_http_request_object() -> None:
    line = json.loads(JsonFormatter().format(access("GET", "/openapi.yaml", "200")))
    assert line["httpRequest"] == {
        "requestMethod": "GET", "requestUrl": "/openapi.yaml", "status": 200,
        "responseSize": "12", "userAgent": None, "remoteIp": "10.0.0.1", "protocol": None,
        "latency": "0.010000s",
    }  # fmt: skip
