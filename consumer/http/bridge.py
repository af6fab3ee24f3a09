"""ASGI in front, WSGI behind: a request reaches a worker thread only once it is whole.

gunicorn's asyncio worker reads every connection on its event loop, so a client that dribbles
its headers or body costs a few kilobytes of buffer, never a thread. This bridge buffers the
whole body under a deadline (``body_timeout``) and a size limit (413 before a byte of an
oversized ``Content-Length`` is read), then runs the Flask app on a small thread pool. Bodies over
``LARGE_BODY_BYTES`` take the server-wide slot (``consumer.http.large_slot``) for their read *and*
their
handling, so the memory spent on request bodies stays bounded however many clients send large ones.

The bridge also keeps the start time of every request in flight: the worker's watchdog
(``consumer.http.worker``) ends a worker whose request outlived the ack deadline, as gunicorn's sync
worker timeout used to.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import count
from typing import Any

from consumer.http.environ import Scope, wsgi_environ
from consumer.http.large_slot import SlotTimeout, large_body_slot
from consumer.http.precheck import PUSH_AUTHENTICATED, Precheck
from consumer.pipeline import decisions
from consumer.pipeline.decisions import Source
from consumer.wire.outcomes import from_error

log = logging.getLogger("consumer.bridge")
LARGE_BODY_BYTES = 1024 * 1024  # Pub/Sub's pushes are far below; a 14 MiB body is the outlier
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Receive = Callable[[], Any]
Send = Callable[[dict[str, Any]], Any]


class Refused(Exception):
    """The request cannot reach the app; ``status`` and the reason go back as JSON."""

    def __init__(
        self,
        status: int,
        reason: str,
        document: dict[str, Any] | None = None,
        decided: bool = False,
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.document = document or {"outcome": "rejected", "error": reason}
        self.decided = decided
        """Already logged and counted as a decision (a push or hook refused by its headers)."""


class Disconnected(Exception):
    """The client went away before its body was complete: nothing to answer."""


@dataclass(frozen=True)
class BridgeLimits:
    max_body_bytes: int
    body_timeout_seconds: float
    header_timeout_seconds: float
    threads: int


class BufferedWsgi:
    """An ASGI application serving a WSGI one from a thread pool, whole requests only."""

    def __init__(
        self, app: WsgiApp, limits: BridgeLimits, precheck: Precheck | None = None
    ) -> None:
        self._app = app
        self.limits = limits
        self._precheck = precheck
        self._executor = ThreadPoolExecutor(limits.threads, thread_name_prefix="request")
        self._ids = count()
        self.in_flight: dict[int, float] = {}
        """``time.monotonic()`` at which each running request's handler started, by request
        number: the time it waited for a thread is not counted, as the handler's own budget
        does not count it (otherwise a queued sweep is ended by the watchdog mid-batch)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)
        # Anything else (a WebSocket) is not served: returning closes it.

    def oldest_seconds(self) -> float:
        """How long the oldest request in flight has run (0 when idle)."""
        starts = list(self.in_flight.values())
        return time.monotonic() - min(starts) if starts else 0.0

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            declared = _content_length(scope)
            if declared is not None and declared > self.limits.max_body_bytes:
                raise Refused(413, "The request body is over the limit.")
            authenticated = await self._check_headers(scope)
            deadline = time.monotonic() + self.limits.body_timeout_seconds
            if _is_small(scope, declared):
                await self._serve(scope, await self._read(receive, deadline), send, authenticated)
                return
            async with self._large_slot(deadline):
                await self._serve(scope, await self._read(receive, deadline), send, authenticated)
        except Refused as refused:
            if not refused.decided:
                extra = {"status": refused.status, "error": refused.reason}
                log.info("request refused", extra=extra)
            await send_json(send, refused.status, refused.document)
        except Disconnected:
            return

    async def _check_headers(self, scope: Scope) -> bool:
        """Refuse what the headers alone condemn (``consumer.http.precheck``) before any body is
        read;
        whether the precheck authenticated the push."""
        if self._precheck is None:
            return False
        loop = asyncio.get_running_loop()
        checked = await loop.run_in_executor(self._executor, self._precheck, scope)
        error = checked.error
        if error is not None:
            outcome = from_error(error)
            source = Source.HOOK if scope.get("path") == "/hooks/deploy" else Source.PUSH
            decisions.record(source, outcome, None, 0.0)  # the one decision line, as in the app
            raise Refused(outcome.http_status, error.message, outcome.body(), decided=True)
        return checked.authenticated

    @contextlib.asynccontextmanager
    async def _large_slot(self, deadline: float) -> AsyncIterator[None]:
        """One large body in the whole server at a time; waiting counts on the body deadline."""
        try:
            async with large_body_slot(deadline):
                yield
        except SlotTimeout:
            raise Refused(503, "Busy with another large request; retry later.") from None

    async def _serve(self, scope: Scope, body: bytes, send: Send, authenticated: bool) -> None:
        loop = asyncio.get_running_loop()
        environ = wsgi_environ(scope, body)
        if authenticated:
            environ[PUSH_AUTHENTICATED] = True
        status, headers, chunks = await loop.run_in_executor(self._executor, self._run, environ)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": chunks})

    def _run(self, environ: dict[str, Any]) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """On a handler thread: the app, timed for the watchdog from when it starts."""
        request = next(self._ids)
        self.in_flight[request] = time.monotonic()
        try:
            return _call(self._app, environ)
        finally:
            del self.in_flight[request]

    async def _read(self, receive: Receive, deadline: float) -> bytes:
        remaining = max(0.0, deadline - time.monotonic())
        try:
            return await asyncio.wait_for(_body(receive, self.limits.max_body_bytes), remaining)
        except TimeoutError:
            seconds = self.limits.body_timeout_seconds
            raise Refused(408, f"The request body did not arrive within {seconds:g} s.") from None


def _is_small(scope: Scope, declared: int | None) -> bool:
    """A body known to be small: a small Content-Length, or none and not chunked (no body)."""
    if declared is not None:
        return declared <= LARGE_BODY_BYTES
    return not any(name == b"transfer-encoding" for name, _ in scope["headers"])


async def _body(receive: Receive, limit: int) -> bytes:
    """The whole body, joined once (no growing buffer: a 14 MiB body is copied one time)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise Refused(413, "The request body is over the limit.")
        chunks.append(chunk)
        if not message.get("more_body"):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _call(app: WsgiApp, environ: dict[str, Any]) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Run the WSGI app to completion in a worker thread; the whole answer comes back."""
    started: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        started[:] = [status, headers]
        return lambda data: None  # the legacy write() callable; Flask never uses it

    result = app(environ, start_response)
    try:
        body = b"".join(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
        # Werkzeug keeps the request in its environ (a reference cycle): clearing it frees the
        # body and everything parsed from it now, not at the next cyclic garbage collection.
        environ.clear()
    status, headers = started
    encoded = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    return int(status.split(" ", 1)[0]), encoded, body


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                raise Refused(400, "Content-Length is not a number.") from None
    return None


async def send_json(send: Send, status: int, document: dict[str, Any]) -> None:
    body = json.dumps(document).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    """Nothing to start or stop: the Flask app was built before the worker served."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
