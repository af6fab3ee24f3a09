"""How the Pub/Sub emulator pushes after a nack: start it on a free port, push to an endpoint on
127.0.0.1 that answers 503 after ``--handler-seconds``, publish ``--messages`` messages, watch for
``--seconds``, and print pushes per message, the gaps between them and the most in flight.

    python -m triggers.local.probe_push --messages 5 --seconds 15

docs/local-stack.md quotes its output. Stops the emulator it started (by PID) in every case.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from pathlib import Path

from triggers.local.clients import ensure_push_subscription, ensure_topic, publisher
from triggers.local.services import free_port, start_pubsub


class Recorder:
    """Arrival times per message id and the peak of concurrent pushes."""

    def __init__(self, handler_seconds: float) -> None:
        self.handler_seconds = handler_seconds
        self.arrivals: dict[str, list[float]] = {}
        self.in_flight = self.peak = 0
        self.lock = threading.Lock()

    def push(self, message_id: str) -> None:
        with self.lock:
            self.arrivals.setdefault(message_id, []).append(time.monotonic())
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        time.sleep(self.handler_seconds)
        with self.lock:
            self.in_flight -= 1


def endpoint(recorder: Recorder) -> ThreadingHTTPServer:
    class Nack(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            recorder.push(body["message"]["messageId"])
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Nack)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def probe(messages: int, seconds: float, handler_seconds: float) -> Recorder:
    recorder = Recorder(handler_seconds)
    server = endpoint(recorder)
    port = free_port()
    with tempfile.TemporaryDirectory() as state:
        emulator = start_pubsub(port, Path(state) / "pubsub.log")
        try:
            host, url = f"127.0.0.1:{port}", f"http://127.0.0.1:{server.server_port}/push"
            topic = ensure_topic(host, "local", "probe-topic")
            ensure_push_subscription(host, "local", "probe-sub", "probe-topic", url, 10)
            client = publisher(host)
            for number in range(messages):
                client.publish(topic, b"probe", n=str(number)).result(timeout=10)
            time.sleep(seconds)
        finally:
            emulator.stop()
            server.shutdown()
    return recorder


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="triggers.local.probe_push", description=__doc__)
    parser.add_argument("--messages", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--handler-seconds", type=float, default=0.5)
    args = parser.parse_args(argv)
    recorder = probe(args.messages, args.seconds, args.handler_seconds)
    gaps = [b - a for times in recorder.arrivals.values() for a, b in pairwise(times)]
    pushes = sum(map(len, recorder.arrivals.values()))
    print(f"messages {len(recorder.arrivals)}, pushes {pushes}, most in flight {recorder.peak}")
    if gaps:
        print(
            f"gap between pushes of one message: median {statistics.median(gaps):.2f} s, "
            f"min {min(gaps):.2f} s, max {max(gaps):.2f} s (handler {args.handler_seconds} s)"
        )


if __name__ == "__main__":
    main()
