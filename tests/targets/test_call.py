"""A target call against a real local HTTP server: what is sent (CloudEvent headers, the
Idempotency-Key, the traceparent, the signatures) and what each answer means."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from bench.support.target_servers import PyTarget, Reply
from consumer.auth.signature import Verifier
from consumer.config.targets import target
from consumer.errors import Permanent, Retryable
from consumer.observe import tracing
from consumer.targets.call import Caller
from consumer.targets.cloudevent import for_event, idempotency_key
from consumer.wire.events import TickEvent
from consumer.wire.message import PushMessage
from consumer.wire.schedule import Every

SLOT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SECRETS = ["first-secret-0123456789", "second-secret-0123456789"]


def caller(url: str, auth: dict[str, Any] | None = None, **options: Any) -> Caller:
    spec = target(
        "orders", url=url, serves={"tick": "process-pending", "period_seconds": 60},
        auth=auth or {"type": "none"}, **options,
    )  # fmt: skip
    return Caller(spec, tokens=lambda audience, deadline: f"token-for-{audience}")


def tick(task: str = "process-pending") -> TickEvent:
    message = PushMessage(message_id="m1", publish_time=SLOT)
    return TickEvent(task, SLOT, Every(60), message)


def call(c: Caller, seconds: float = 10.0, event: TickEvent | None = None) -> dict[str, object]:
    deadline = time.monotonic() + seconds
    event = event or tick()
    return c.call(for_event(event, event.key), lambda: deadline - time.monotonic())


def test_the_request_is_a_binary_cloudevent_with_the_inbox_key(py_target: PyTarget) -> None:
    token = tracing.current.set(tracing.Trace("a" * 32, "b" * 16, True))
    try:
        result = call(caller(py_target.url))
    finally:
        tracing.current.reset(token)
    assert result == {"target": "orders", "status": 200, "answer": {"ok": True}}
    (got,) = py_target.received
    headers = {k.lower(): v for k, v in got.headers.items()}
    assert headers["ce-specversion"] == "1.0"
    assert headers["ce-type"] == "com.consumer.tick"
    assert headers["ce-id"] == "tick:process-pending:2026-03-01T12:00:00+00:00"
    assert headers["ce-source"] == "/consumer/ticks"
    assert headers["ce-subject"] == "process-pending"
    assert headers["ce-time"] == "2026-03-01T12:00:00Z"
    assert headers["content-type"] == "application/json"
    assert headers["idempotency-key"] == '"tick:process-pending:2026-03-01T12:00:00+00:00"'
    version, trace_id, span, flags = headers["traceparent"].split("-")
    assert (version, trace_id, flags) == ("00", "a" * 32, "01") and span != "b" * 16
    body = json.loads(got.body)
    assert body == {"task": "process-pending", "slot": "2026-03-01T12:00:00Z", "schedule": "60"}


def test_the_idempotency_key_is_a_structured_field_string() -> None:
    assert idempotency_key("plain:key") == '"plain:key"'
    assert idempotency_key('a "b" \\ é%') == '"a%20%22b%22%20\\\\%20%C3%A9%25"'
    assert idempotency_key("é") != idempotency_key("%C3%A9")  # percent-encoding is injective


def test_hmac_signs_with_every_secret_as_the_deploy_hook_verifies(py_target: PyTarget) -> None:
    call(caller(py_target.url, {"type": "hmac", "secrets": SECRETS}))
    (got,) = py_target.received
    for secret in SECRETS:  # a target holding either side of a rotation accepts the call
        Verifier([secret], 300).verify(got.headers, got.body, time.time())


def test_google_auth_sends_the_audiences_token(py_target: PyTarget) -> None:
    call(caller(py_target.url, {"type": "google", "audience": "https://orders.internal"}))
    assert (
        py_target.received[0].headers["Authorization"] == "Bearer token-for-https://orders.internal"
    )


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503])
def test_transient_statuses_retry(py_target: PyTarget, status: int) -> None:
    py_target.replies = [Reply(status, b"busy", {})]
    with pytest.raises(Retryable, match=f"HTTP {status}: busy"):
        call(caller(py_target.url))


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
def test_other_client_errors_are_permanent(py_target: PyTarget, status: int) -> None:
    py_target.replies = [Reply(status, b'{"error": "no"}', {})]
    with pytest.raises(Permanent, match=f"HTTP {status}"):
        call(caller(py_target.url))


def test_a_redirect_is_not_followed_and_is_permanent(py_target: PyTarget) -> None:
    py_target.replies = [Reply(307, b"", {"Location": "https://elsewhere.example/"})]
    with pytest.raises(
        Permanent, match=r"HTTP 307 \(redirect to 'https://elsewhere.example/'\), not followed"
    ):
        call(caller(py_target.url))
    assert len(py_target.received) == 1


def test_retry_after_is_honoured_inside_the_budget(py_target: PyTarget) -> None:
    py_target.replies = [Reply(429, b"", {"Retry-After": "1"}), Reply()]
    assert call(caller(py_target.url), seconds=10)["status"] == 200
    assert len(py_target.received) == 2
    keys = {r.headers["Idempotency-Key"] for r in py_target.received}
    assert len(keys) == 1, "the repeat carries the same key"


def test_retry_after_beyond_the_budget_goes_back_to_redelivery(py_target: PyTarget) -> None:
    py_target.replies = [Reply(503, b"", {"Retry-After": "120"}), Reply()]
    started = time.monotonic()
    with pytest.raises(Retryable, match="HTTP 503"):
        call(caller(py_target.url), seconds=10)
    assert time.monotonic() - started < 2 and len(py_target.received) == 1


def test_a_target_that_does_not_answer_in_its_timeout_is_retried(py_target: PyTarget) -> None:
    py_target.replies = [Reply(delay=3)]
    started = time.monotonic()
    with pytest.raises(Retryable, match="timed out"):
        call(caller(py_target.url, timeout_seconds=0.5), seconds=30)
    assert time.monotonic() - started < 2


def test_the_budget_caps_the_targets_timeout(py_target: PyTarget) -> None:
    py_target.replies = [Reply(delay=3)]
    started = time.monotonic()
    with pytest.raises(Retryable, match="timed out"):
        call(caller(py_target.url, timeout_seconds=30), seconds=1.5)
    assert time.monotonic() - started < 2


def test_a_reset_connection_is_retried(py_target: PyTarget) -> None:
    def reset(handler: BaseHTTPRequestHandler) -> None:
        handler.close_connection = True
        handler.connection.shutdown(2)

    py_target.replies = [reset]
    with pytest.raises(Retryable, match="ConnectionError"):
        call(caller(py_target.url))


def test_garbage_and_huge_answers_are_summarised(py_target: PyTarget) -> None:
    py_target.replies = [Reply(200, b"\x00<html>not json", {}), Reply(200, b"x" * 5_000_000, {})]
    garbage = call(caller(py_target.url))
    assert garbage["answer_excerpt"] == "\\x00<html>not json" and "answer" not in garbage
    huge = call(caller(py_target.url))
    assert "answer_truncated" in huge and len(json.dumps(huge)) < 500


def test_an_empty_2xx_is_done(py_target: PyTarget) -> None:
    py_target.replies = [Reply(204, b"", {})]
    assert call(caller(py_target.url)) == {"target": "orders", "status": 204, "answer_bytes": 0}


def test_the_concurrency_limit_holds_calls_back(py_target: PyTarget) -> None:
    py_target.replies = [Reply(delay=0.5)]
    limited = caller(py_target.url, concurrency=1)
    started = time.monotonic()
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: call(limited), range(3)))
    assert all(r["status"] == 200 for r in results)
    assert time.monotonic() - started >= 1.4, "three calls of 0.5 s one at a time"
