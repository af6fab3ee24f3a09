"""A stand-in for the Compute Engine metadata server, over real HTTP on loopback, speaking its
documented wire format to google-auth: every request must carry ``Metadata-Flavor: Google`` and
every answer does; ``/`` answers the detection ping, ``.../service-accounts/default/`` the
account (JSON), and ``.../service-accounts/default/identity?audience=A&format=full`` an ID token
for ``A`` (the JWT as text), after ``identity_delay`` seconds: a slow metadata server."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.http.servings import in_thread

FLAVOR = ("Metadata-Flavor", "Google")
ACCOUNT_PATH = "/computeMetadata/v1/instance/service-accounts/default/"
IDENTITY_PATH = ACCOUNT_PATH + "identity"


class MetadataServer:
    """``sign(audience)``: the ID token the identity endpoint answers; ``identities``: how many
    identity requests it received."""

    def __init__(self, email: str, sign: Callable[[str], str], identity_delay: float) -> None:
        self.email, self.sign, self.identity_delay = email, sign, identity_delay
        self.identities = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.host = f"127.0.0.1:{self._server.server_address[1]}"

    def answer(self, path: str, query: dict[str, list[str]]) -> tuple[int, str, str]:
        """Status, content type and body for one GET."""
        if path == "/":
            return 200, "application/text", ""
        if path == ACCOUNT_PATH:
            account = f'{{"email": "{self.email}", "aliases": ["default"], "scopes": []}}'
            return 200, "application/json", account
        if path == IDENTITY_PATH and query.get("format") == ["full"]:
            self.identities += 1
            time.sleep(self.identity_delay)
            return 200, "text/html", self.sign(query["audience"][0])
        return 404, "text/html", "not found"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if self.headers.get(FLAVOR[0]) != FLAVOR[1]:
                    status, kind, body = 403, "text/html", "Missing Metadata-Flavor:Google header"
                else:
                    status, kind, body = server.answer(url.path, parse_qs(url.query))
                data = body.encode()
                self.send_response(status)
                self.send_header(*FLAVOR)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:
                pass

        return Handler

    @contextmanager
    def running(self) -> Iterator[MetadataServer]:
        with in_thread(self._server):
            yield self
