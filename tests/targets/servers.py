"""Real HTTP servers that play targets: a Python one for the unit tests (it answers what the
test tells it and records every request) and the Node.js one (``target_server.js``), started on
a free loopback port and stopped by PID."""

from __future__ import annotations

import json
import shutil
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

from tests.conftest import stop_process

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
