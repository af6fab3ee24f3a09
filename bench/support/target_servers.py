"""Real HTTP servers that play targets: a Python one for the unit tests (it answers what the
test tells it and records every request) and the Node.js one (``target_server.js``), started on
a free loopback port and stopped by PID."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

from bench.support.serving import stop_process

NODE = shutil.which("node")
SCRIPT = Path(__file__).with_name("target_server.js")


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Reply:
    status: int = 200
    body: bytes = b'{"ok": true}'
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    delay: float = 0.0


class Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, *_: Any) -> None:
        """A connection the test reset on purpose is no error."""


class PyTarget:
    """A threaded Python HTTP server: ``replies`` are answered in turn (the last one repeats)."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.replies: list[Reply | Callable[[BaseHTTPRequestHandler], None]] = [Reply()]
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                target.received.append(Received(self.path, dict(self.headers.items()), body))
                reply = target.replies.pop(0) if len(target.replies) > 1 else target.replies[0]
                if callable(reply):
                    reply(self)
                    return
                time.sleep(reply.delay)
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = Quiet(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    @contextmanager
    def running(self) -> Iterator[PyTarget]:
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()


class NodeTarget:
    """``target_server.js`` in its own process."""

    def __init__(self) -> None:
        if NODE is None:
            raise RuntimeError("node is not installed")
        self.process = subprocess.Popen(
            [NODE, str(SCRIPT)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        self.url = f"http://127.0.0.1:{json.loads(line)['port']}"

    def control(self, **settings: Any) -> None:
        requests.post(f"{self.url}/_control", json=settings, timeout=5).raise_for_status()

    def calls(self) -> list[dict[str, Any]]:
        return list(requests.get(f"{self.url}/_calls", timeout=30).json()["calls"])

    def raw(self) -> str:
        return requests.get(f"{self.url}/_raw", timeout=5).text

    def stop(self) -> None:
        stop_process(self.process)
        if self.process.stdout is not None:
            self.process.stdout.close()


class Dripping:
    """A raw HTTP server that answers 200 and sends its answer one byte every ``interval``
    seconds: the body (``headers_first``) or the whole answer, status line included. Each read
    of the client's then returns within any per-read timeout, so only a deadline on the whole
    exchange ends the call."""

    def __init__(self, interval: float = 0.5, length: int = 40, headers_first: bool = True):
        self.interval, self.length, self.headers_first = interval, length, headers_first
        self.requests = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)  # so the accept loop sees the stop
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self._stop = threading.Event()

    @contextmanager
    def running(self) -> Iterator[Dripping]:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join(5)
            self.listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            connection.settimeout(None)
            self.requests += 1
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            _read_request(connection)
            body = b"[" + b"1," * ((self.length - 2) // 2) + b"1]"
            head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            if self.headers_first:
                connection.sendall(head)
            for byte in body if self.headers_first else head + body:
                if self._stop.wait(self.interval):
                    return
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    return  # the client gave up: what the tests expect


def _read_request(connection: socket.socket) -> None:
    """The request's head and its ``Content-Length`` body, discarded."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lengths = [line for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")]
    length = int(lengths[0].split(b":")[1]) if lengths else 0
    while len(rest) < length:
        chunk = connection.recv(65536)
        if not chunk:
            return
        rest += chunk
