"""The served request path, over real sockets against ``consumer serve``: what is refused from
the headers alone (before a body is read), the header and body deadlines, the size limit, the
server's own plain-text refusals (431, 414), and the watchdog that ends a worker whose request
outlived the ack deadline."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import requests

from consumer.demo.processes import descendants
from consumer.wire.envelopes_out import wrapped_body
from tests.conftest import free_port, stop_process, wait_until
from tests.http.test_serve import clean_env

pytestmark = pytest.mark.slow
TOKEN = "push-token-0123456789abcdef"


@dataclass
class Served:
    base: str
    port: int
    process: subprocess.Popen[bytes]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One server for the module (the watchdog test, which replaces its worker, runs last)."""
    tmp_path = tmp_path_factory.mktemp("bridge")
    port = free_port()
    env = clean_env(
        tmp_path, CONSUMER_PUSH_TOKEN=TOKEN, CONSUMER_HEADER_TIMEOUT_SECONDS="2",
        CONSUMER_BODY_TIMEOUT_SECONDS="2", CONSUMER_ACK_DEADLINE_SECONDS="10",
        CONSUMER_SAFETY_MARGIN_SECONDS="2", CONSUMER_PLUGINS="tests.plugins.effects",
        CONSUMER_DEPLOY_HOOK_SECRETS="hook-secret-0123456789",
    )  # fmt: skip
    subprocess.run([sys.executable, "-m", "consumer", "db", "upgrade"], env=env,
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-m", "consumer", "serve", "--bind", f"127.0.0.1:{port}",
         "--workers", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: requests.get(f"{base}/healthz", timeout=2).ok)
        yield Served(base, port, process)
    finally:
        stop_process(process, timeout=60)


def exchange(port: int, head: bytes, wait: float = 5.0) -> tuple[bytes, float]:
    """Send ``head`` (no body after it) and return what comes back, and how long it took."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(head)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except TimeoutError:
            pass
    return received, time.monotonic() - started


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def json_of(response: bytes) -> dict[str, object]:
    result: dict[str, object] = json.loads(response.split(b"\r\n\r\n", 1)[1])
    return result


def test_an_unauthenticated_push_is_refused_before_its_body(served: Served) -> None:
    head = b"POST /push HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n"
    response, seconds = exchange(served.port, head)
    assert status_of(response) == 401 and seconds < 1.5, (response, seconds)
    assert json_of(response)["error"] == "missing or invalid token"


def test_an_unsigned_hook_is_refused_before_its_body(served: Served) -> None:
    head = b"POST /hooks/deploy HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n"
    response, seconds = exchange(served.port, head)
    assert status_of(response) == 401 and seconds < 1.5, (response, seconds)
    assert "X-Consumer-Signature" in str(json_of(response)["error"])


def test_a_body_that_does_not_arrive_in_time_is_a_408(served: Served) -> None:
    head = f"POST /push?token={TOKEN} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{{"
    response, seconds = exchange(served.port, head.encode())
    assert status_of(response) == 408 and 1.5 < seconds < 4.5, (response, seconds)
    assert json_of(response)["outcome"] == "rejected"


def test_headers_that_do_not_arrive_in_time_close_the_connection(served: Served) -> None:
    response, seconds = exchange(served.port, b"POST /push HTTP/1.1\r\nHost: x\r\n")
    assert response == b"" and 1.5 < seconds < 4.5, seconds


def test_a_declared_body_over_the_limit_is_a_413_unread(served: Served) -> None:
    head = f"POST /push?token={TOKEN} HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n"
    response, seconds = exchange(served.port, head.encode())
    assert status_of(response) == 413 and seconds < 1.5
    assert json_of(response)["outcome"] == "rejected"


def content_type(response: bytes) -> bytes:
    """The one Content-Type header of a raw response."""
    lines = response.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]
    (value,) = (line[13:].strip() for line in lines if line.lower().startswith(b"content-type:"))
    return value


GUNICORN_REFUSALS = {
    "a header line over 8,190 bytes": (b"X-Big: " + b"a" * 9000 + b"\r\n", b"/healthz", 431),
    "101 header fields": (b"".join(b"X-%d: v\r\n" % n for n in range(101)), b"/healthz", 431),
    "a request line over 4,094 bytes": (b"", b"/healthz?" + b"a" * 5000, 414),
}


@pytest.mark.parametrize("case", sorted(GUNICORN_REFUSALS))
def test_the_servers_own_refusals_are_plain_text(served: Served, case: str) -> None:
    """The table in docs/security.md: gunicorn's parser answers before our code runs."""
    headers, target, status = GUNICORN_REFUSALS[case]
    head = b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n"
    response, _ = exchange(served.port, head)
    assert status_of(response) == status, response[:200]
    assert content_type(response) == b"text/plain"


def test_a_request_within_the_ack_deadline_keeps_its_worker(served: Served) -> None:
    """A handler using 7 s of the 10 s ack deadline (beyond half of it, gunicorn's heartbeat
    interval) is not ended: ending it mid-sweep would re-send the batch it was sending."""
    (worker,) = descendants(served.process.pid)
    deploy = json.dumps({"event": "deploy", "service": "web", "release": "within"}).encode()
    body = wrapped_body(data=deploy, attributes={"event": "deploy", "hang": "7"})
    answer = requests.post(f"{served.base}/push?token={TOKEN}", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    assert descendants(served.process.pid) == {worker}


def test_a_request_past_the_ack_deadline_ends_its_worker(served: Served) -> None:
    """The sync worker's timeout, kept: the hung handler's worker is replaced (and the push
    answered by the new one only on redelivery), so no second copy runs beside it."""
    (worker,) = descendants(served.process.pid)
    body = wrapped_body(attributes={"task": "effect", "hang": "30"})
    with pytest.raises(requests.ConnectionError):
        requests.post(f"{served.base}/push?token={TOKEN}", json=body, timeout=30)
    wait_until(lambda: descendants(served.process.pid) - {worker} != set(), timeout=30)
    assert worker not in descendants(served.process.pid)
    assert requests.get(f"{served.base}/healthz", timeout=5).ok
