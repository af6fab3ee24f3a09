"""ASGI in front, WSGI behind: a request reaches a worker thread only once it is whole.

gunicorn's asyncio worker reads every connection on its event loop, so a client that dribbles
its headers or body costs a few kilobytes of buffer, never a thread. This bridge buffers the
whole body under a deadline (``body_timeout``: 408) and its route's size limit, then runs the app
on a small thread pool. Before a byte of the body is read, the front door (``consumer.http.gate``)
admits the request from its one view (``consumer.http.request``): it refuses what the request line
and headers condemn (no such route, a wrong method, an ambiguous or missing credential, an
oversized ``Content-Length``) and fixes the route's limit, so a chunked body to ``/ticks/*`` or
``/hooks/deploy`` is cut off at 64 KiB, not at the push limit. Only an admitted body that may be
over ``LARGE_BODY_BYTES`` (a push) takes the server-wide slot (``consumer.http.large_slot``) for
its read *and* its handling, so the memory spent on request bodies stays bounded however many
clients send large ones (503 when it stays taken), and no unauthenticated request ever holds it.
Every refusal's status and body come from the outcome table (``consumer.wire.outcomes``).

The bridge also keeps the start time of every request in flight: the worker's watchdog
(``consumer.http.worker``) ends a worker whose request outlived the ack deadline, as gunicorn's sync
worker timeout used to.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import count
from typing import Any

from consumer.errors import BodyTimeout, BodyTooLarge, ConsumerError, Unavailable
from consumer.http.door import Answer, refusal
from consumer.http.environ import Scope, wsgi_environ
from consumer.http.gate import ADMISSION, Admission, Gate, WsgiApp, declared_size
from consumer.http.large_slot import SlotTimeout, large_body_slot
from consumer.http.request import RequestView

LARGE_BODY_BYTES = 1024 * 1024  # Pub/Sub's pushes are far below; a 14 MiB body is the outlier
Receive = Callable[[], Any]
Send = Callable[[dict[str, Any]], Any]


class Disconnected(Exception):
    """The client went away before its body was complete: nothing to answer."""


@dataclass(frozen=True)
class BridgeLimits:
    max_body_bytes: int
    body_timeout_seconds: float
    header_timeout_seconds: float
    threads: int


class BufferedWsgi:
    """An ASGI application serving a WSGI one from a thread pool, whole requests only.

    ``gate`` (``consumer.http.gate``) admits each request before any body is read; ``app`` is
    called with the admission in the environ (``ADMISSION``), so the door in it
    (``consumer.http.door``) does not admit the request again."""

    def __init__(self, app: WsgiApp, limits: BridgeLimits, gate: Gate) -> None:
        self._app = app
        self.limits = limits
        self.gate = gate
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
        started = time.monotonic()
        view = RequestView.of_scope(scope)
        try:
            admission = await self._admit(view)
            deadline = time.monotonic() + self.limits.body_timeout_seconds
            if _is_small(view, admission.limit):
                body = await self._read(receive, deadline, admission.limit)
                await self._serve(scope, admission, body, send)
                return
            async with self._large_slot(deadline):
                body = await self._read(receive, deadline, admission.limit)
                await self._serve(scope, admission, body, send)
        except ConsumerError as error:  # refused by the door, or while the body was read
            await send_answer(send, refusal(self.gate, view, error, started))
        except Disconnected:
            return

    async def _admit(self, view: RequestView) -> Admission:
        """The door, on a handler thread (verifying a token may fetch certificates), before any
        body is read: raises what refuses the request."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.gate.admit, view)

    @contextlib.asynccontextmanager
    async def _large_slot(self, deadline: float) -> AsyncIterator[None]:
        """One large body in the whole server at a time; waiting counts on the body deadline."""
        try:
            async with large_body_slot(deadline):
                yield
        except SlotTimeout:
            raise Unavailable("Busy with another large request; retry later.") from None

    async def _serve(self, scope: Scope, admission: Admission, body: bytes, send: Send) -> None:
        loop = asyncio.get_running_loop()
        environ = wsgi_environ(scope, body)
        environ[ADMISSION] = admission
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

    async def _read(self, receive: Receive, deadline: float, limit: int) -> bytes:
        remaining = max(0.0, deadline - time.monotonic())
        try:
            return await asyncio.wait_for(_body(receive, limit), remaining)
        except TimeoutError:
            seconds = self.limits.body_timeout_seconds
            raise BodyTimeout(f"The request body did not arrive within {seconds:g} s.") from None


def _is_small(view: RequestView, limit: int) -> bool:
    """A body known to be small: the route takes no large one, or a small Content-Length, or none
    and not chunked (no body). (The door refused a Content-Length over ``limit``.)"""
    if limit <= LARGE_BODY_BYTES:
        return True
    declared = declared_size(view.headers.get("content-length"), limit)
    if declared is not None:
        return declared <= LARGE_BODY_BYTES
    return not view.chunked()


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
            raise BodyTooLarge(f"the body is over {limit} bytes")
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


async def send_answer(send: Send, answered: Answer) -> None:
    status, headers, body = answered
    encoded = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    await send({"type": "http.response.start", "status": status, "headers": encoded})
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
