"""A round-robin HTTP balancer on loopback, standing in for the cloud load balancer in front of
the pods. It counts deliveries per pod and statuses, and plays Pub/Sub's at-least-once side: a
share of the requests it forwarded are delivered again (same body, same messageId) to the next
pod, as a redelivery would be."""

from __future__ import annotations

import http.client
import itertools
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from consumer.demo.processes import free_port

FORWARD_TIMEOUT_SECONDS = 120


@dataclass
class Traffic:
    """What went through the balancer."""

    per_pod: Counter[int] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    in_flight: Counter[int] = field(default_factory=Counter)
    redelivered: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, port: int, status: int) -> None:
        with self.lock:
            self.per_pod[port] += 1
            self.statuses[status] += 1

    def busiest(self) -> tuple[int, int] | None:
        """The pod with the most requests in flight (sweeps running there) and their count."""
        with self.lock:
            busy = [(count, port) for port, count in self.in_flight.items() if count > 0]
        if not busy:
            return None
        count, port = max(busy)
        return port, count


class Balancer:
    """``with Balancer(pod_ports, redeliver_every=5) as lb:``; push to ``lb.url``."""

    def __init__(self, pod_ports: list[int], redeliver_every: int = 0) -> None:
        self.pod_ports = pod_ports
        self.redeliver_every = redeliver_every
        self.traffic = Traffic()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/push"
        self._turn = itertools.cycle(range(len(pod_ports)))
        self._served = itertools.count(1)
        self._lock = threading.Lock()
        self._server = QuietServer(("127.0.0.1", self.port), self._handler_class())

    def __enter__(self) -> Balancer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def forward(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        """Send to the next pod that accepts a connection (a refused connection sent nothing,
        so trying the next pod is safe); a connection lost mid-request is a 502."""
        for _ in range(len(self.pod_ports)):
            with self._lock:
                port = self.pod_ports[next(self._turn)]
            try:
                status, answer = self._post_counted(port, path, body, headers)
            except ConnectionRefusedError:
                continue
            except (OSError, http.client.HTTPException):
                status, answer = 502, b'{"outcome": "bad gateway"}'
            self.traffic.record(port, status)
            return status, answer
        self.traffic.record(0, 502)
        return 502, b'{"outcome": "no pod answered"}'

    def _post_counted(
        self, port: int, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        with self.traffic.lock:
            self.traffic.in_flight[port] += 1
        try:
            return _post(port, path, body, headers)
        finally:
            with self.traffic.lock:
                self.traffic.in_flight[port] -= 1

    def maybe_redeliver(self, path: str, body: bytes, headers: dict[str, str]) -> None:
        if self.redeliver_every and next(self._served) % self.redeliver_every == 0:
            with self.traffic.lock:
                self.traffic.redelivered += 1
            threading.Thread(
                target=self._redeliver, args=(path, body, headers), daemon=True
            ).start()

    def _redeliver(self, path: str, body: bytes, headers: dict[str, str]) -> None:
        time.sleep(0.5)
        self.forward(path, body, headers)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        balancer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
                status, answer = balancer.forward(self.path, body, headers)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                balancer.maybe_redeliver(self.path, body, headers)

            def log_message(self, *_: Any) -> None:
                pass

        return Handler


class QuietServer(ThreadingHTTPServer):
    """A client that hangs up (the emulator giving up on a push) is no error worth a trace."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


def _post(port: int, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=FORWARD_TIMEOUT_SECONDS)
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()
