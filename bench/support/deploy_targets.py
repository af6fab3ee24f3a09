"""A real local HTTP server that counts hits: the caches our warmers warm, in the tests.

Paths decide behaviour: ``/ok/*`` answers after ``delay`` seconds, ``/slow/*`` after ``slow``
seconds (longer than the warmer's timeout), ``/fail/*`` is a 500, ``/missing/*`` a 404,
``/flaky/*`` a 503 on its first hit only; any path in ``files`` is served as is (sitemaps), any
path in ``redirects`` is a 302 to its URL.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class TargetServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256  # the default 5 drops concurrent connects (1 s SYN retries)

    def __init__(self, delay: float = 0.005, slow: float = 3.0) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.delay, self.slow = delay, slow
        self.files: dict[str, bytes] = {}
        self.redirects: dict[str, str] = {}
        self.hits: Counter[str] = Counter()
        self.headers_seen: dict[str, dict[str, str]] = {}
        self.in_flight = self.peak = 0
        self.lock = threading.Lock()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> TargetServer:
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def urls(self, kind: str, count: int, prefix: str = "") -> list[str]:
        return [f"{self.url}/{kind}/{prefix}{n}" for n in range(count)]

    def hits_of(self, urls: list[str]) -> list[int]:
        return [self.hits[url.removeprefix(self.url)] for url in urls]

    def enter(self, path: str, headers: dict[str, str]) -> int:
        with self.lock:
            self.hits[path] += 1
            self.headers_seen[path] = headers
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            return self.hits[path]

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1


class _Handler(BaseHTTPRequestHandler):
    server: TargetServer

    def do_GET(self) -> None:
        server = self.server
        hit = server.enter(self.path, dict(self.headers))
        left = False
        try:
            status, body = self._answer(hit)
            self.send_response(status)
            if self.path in server.redirects:
                self.send_header("Location", server.redirects[self.path])
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            # Leave before the last bytes go out: once the client has the whole response it
            # may start its next request, and counting this one still would overstate the peak.
            server.leave()
            left = True
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the warmer gave up on a slow target; that is the point of the test
        finally:
            if not left:
                server.leave()

    def _answer(self, hit: int) -> tuple[int, bytes]:
        server, kind = self.server, self.path.split("/")[1]
        if self.path in server.files:
            return 200, server.files[self.path]
        if self.path in server.redirects:
            return 302, b"moved"
        if self.path == "/_hits":  # for a server in another process (the bench)
            with server.lock:
                return 200, json.dumps(dict(server.hits)).encode()
        if kind in ("ok", "slow"):
            time.sleep(server.delay if kind == "ok" else server.slow)
            return 200, b"warm " + self.path.encode()
        if kind == "flaky":
            return (503, b"not yet") if hit == 1 else (200, b"warm")
        return {"fail": 500, "missing": 404}.get(kind, 404), b"no"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the counters are the record."""


def sitemap(urls: list[str]) -> bytes:
    entries = "".join(f"<url><loc>{url}</loc></url>" for url in urls)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
    ).encode()


def sitemap_index(urls: list[str]) -> bytes:
    entries = "".join(f"<sitemap><loc>{url}</loc></sitemap>" for url in urls)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}'
        "</sitemapindex>"
    ).encode()
