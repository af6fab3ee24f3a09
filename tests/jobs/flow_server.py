"""A real HTTP server that plays a job-kind target for the flow-control hammer tests: it holds
each request for ``--hold`` seconds and records when each arrived and left and how many it held
at once (``GET /_log``). Run it in its own process: ``python -m tests.jobs.flow_server``; it
prints its port as the first line of its output."""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Log:
    """Every request's arrival and departure, and the most held at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held = 0
        self.max_held = 0
        self.calls: list[dict[str, Any]] = []

    def arrive(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.held += 1
            self.max_held = max(self.max_held, self.held)
            call = {"id": body.get("id"), "payload": body.get("payload"), "start": time.time()}
            call["held"] = self.held
            self.calls.append(call)
        return call

    def leave(self, call: dict[str, Any]) -> None:
        with self.lock:
            self.held -= 1
            call["end"] = time.time()

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"max_held": self.max_held, "calls": [dict(call) for call in self.calls]}


def serve(hold: float) -> None:
    log = Log()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            call = log.arrive(body)
            time.sleep(hold)
            log.leave(call)
            self._answer(b'{"ok": true}')

        def do_GET(self) -> None:
            self._answer(json.dumps(log.snapshot()).encode())

        def _answer(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--hold", type=float, default=0.0)
    serve(parser.parse_args().hold)
