"""The four servings of the front door, each a real server on 127.0.0.1 with its own database:

- ``gunicorn``: ``consumer serve``'s command (gunicorn's asyncio worker and the bridge);
- ``wsgiref``: the plain WSGI app (``create_app``, as ``consumer.http.wsgi:app()``) under wsgiref;
- ``werkzeug``: the same under Werkzeug's server;
- ``embedded``: a host Flask app with the extension mounted under ``/consumer``, under Werkzeug's
  server (every corpus path is sent below its prefix).

Requests go as raw bytes over a socket (``send``), so a lower-case method, a repeated header or a
chunked body reaches each server exactly as written.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from sqlalchemy import Engine, func, inspect, select, table
from werkzeug.serving import make_server as werkzeug_server

from consumer.db.engine import make_engine
from consumer.http.app import create_app
from consumer.service import compose
from tests.conftest import Server
from tests.http.host import PREFIX, host_app

SERVINGS = ("gunicorn", "wsgiref", "werkzeug", "embedded")


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes

    def __str__(self) -> str:
        return f"{self.status} {self.body[:160]!r}"


@dataclass
class Serving:
    name: str
    port: int
    prefix: str
    engine: Engine

    def send(self, raw: Callable[[str], bytes]) -> Answer:
        """``raw(prefix)``: the request's bytes, its path below this serving's prefix."""
        return send(self.port, raw(self.prefix))

    def rows(self) -> dict[str, int]:
        """Rows per table: what a refused request must leave as it found it."""
        with self.engine.connect() as connection:
            names = inspect(connection).get_table_names()
            count = lambda name: select(func.count()).select_from(table(name))  # noqa: E731
            return {
                name: int(connection.execute(count(name)).scalar_one())
                for name in names
                if name != "alembic_version"
            }


class QuietWsgiref(WSGIRequestHandler):
    def log_message(self, *_: Any) -> None:
        """One line per request on stderr would drown the test's output."""


@contextmanager
def in_thread(server: Any) -> Iterator[int]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def declared(engine: Engine, timeout: float = 60) -> None:
    """Wait for a server process's job kinds in ``job_kinds``: its LISTEN thread declares them
    after boot, on its own time, and a test that reads the tables' rows first sees them appear
    later as if a request had written them (seen once on a loaded machine)."""
    deadline = time.monotonic() + timeout
    count = select(func.count()).select_from(table("job_kinds"))
    while time.monotonic() < deadline:
        with engine.connect() as connection:
            if connection.execute(count).scalar_one():
                return
        time.sleep(0.05)
    raise TimeoutError("the server declared no job kinds")


@contextmanager
def servings(
    env_of: Callable[[str], dict[str, str]],
    databases: list[str],
    start_server: Callable[..., Server],
) -> Iterator[dict[str, Serving]]:
    """The four servings, ``databases[i]`` for the i-th of ``SERVINGS``."""
    engines = [make_engine(url) for url in databases]
    services = [compose(env_of(url)) for url in databases[1:]]
    try:
        gunicorn = start_server(env_of(databases[0]), workers=1)
        declared(engines[0])
        plain = create_app(services[0])
        plain2 = create_app(services[1])
        host = host_app(services[2])
        wsgiref = make_server("127.0.0.1", 0, plain, handler_class=QuietWsgiref)
        werkzeug = werkzeug_server("127.0.0.1", 0, plain2, threaded=True)
        embedded = werkzeug_server("127.0.0.1", 0, host, threaded=True)
        with in_thread(wsgiref) as p1, in_thread(werkzeug) as p2, in_thread(embedded) as p3:
            ports = (gunicorn.port, p1, p2, p3)
            prefixes = ("", "", "", PREFIX)
            yield {
                name: Serving(name, port, prefix, engine)
                for name, port, prefix, engine in zip(
                    SERVINGS, ports, prefixes, engines, strict=True
                )
            }
    finally:
        for engine in engines:
            engine.dispose()
        for service in services:  # their pooled connections closed now, not by the collector
            service.close()


def send(port: int, request: bytes, timeout: float = 30) -> Answer:
    """One request on its own connection (it says ``Connection: close``); the answer, read to
    its declared end (a server that keeps a connection open after an unread body is not waited
    for)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        with suppress(BrokenPipeError, ConnectionResetError):  # answered before the whole body
            sock.sendall(request)
        received = bytearray()
        with suppress(ConnectionResetError):
            while not complete(received) and (chunk := sock.recv(65536)):
                received += chunk
    return parse(bytes(received))


def complete(received: bytearray) -> bool:
    head, found, body = bytes(received).partition(b"\r\n\r\n")
    if not found:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return body.endswith(b"0\r\n\r\n")


def parse(response: bytes) -> Answer:
    head, _, body = response.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    if not lines[0]:
        return Answer(0, b"(no answer)")
    status = int(lines[0].split()[1])
    headers = {
        k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])
    }
    if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
        body = dechunk(body)
    return Answer(status, body)


def dechunk(body: bytes) -> bytes:
    out = bytearray()
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return bytes(out)
