"""The gunicorn worker: gunicorn's asyncio (ASGI) worker plus two deadlines it lacks.

- **Header deadline.** gunicorn closes an idle kept-alive connection after ``keepalive``, but a
  new connection may take forever to finish its headers. Here it has ``header_timeout`` seconds
  (``CONSUMER_HEADER_TIMEOUT_SECONDS``), then it is closed. A slow client only ever holds a
  socket and a small buffer on the event loop, never a thread.
- **Request watchdog.** The event loop keeps gunicorn's heartbeat going while handlers run on
  threads, so gunicorn's ``timeout`` alone would no longer end a stuck handler. The watchdog ends
  the worker once a request has run for ``timeout`` (the ack deadline), as the sync worker's
  timeout did: Pub/Sub has given up on it, and the inbox lease (ack deadline + margin) expires
  only after the worker is gone, so no second copy can run beside it. Its one line goes out as
  a raw write that never waits (``exit_past_deadline``): a log handler stuck on a full pipe, or
  its lock held by a thread stuck there, must not freeze the one safety net.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import weakref
from typing import Any, ClassVar

from flask import Flask
from gunicorn.asgi.protocol import ASGIProtocol
from gunicorn.workers import gasgi

from consumer.http.bridge import BufferedWsgi
from consumer.http.large_slot import fix_mmap_threshold
from consumer.http.wsgi import bridged

log = logging.getLogger("consumer.worker")
DEFAULT_HEADER_TIMEOUT_SECONDS = 10.0
WATCHDOG_MESSAGE = "a request outlived the ack deadline; the worker exits so it cannot run on"
STDERR = 2
LINE_LIMIT = 4096
"""``PIPE_BUF`` on Linux: a write this short into a pipe with room goes in whole, at once."""


class DeadlineProtocol(ASGIProtocol):
    """gunicorn's HTTP/1 protocol, closing a connection whose first request's headers are late
    (later requests on a kept-alive connection are bounded by gunicorn's keepalive timer)."""

    _header_timer: asyncio.TimerHandle | None = None
    live: ClassVar[weakref.WeakSet[DeadlineProtocol]] = weakref.WeakSet()

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        DeadlineProtocol.live.add(self)
        seconds = self.worker.header_timeout()
        self._header_timer = self.worker.loop.call_later(seconds, self._headers_late)

    def _on_headers_complete(self) -> Any:
        self._cancel_header_timer()
        return super()._on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def close_if_idle(self) -> None:
        """At shutdown: a connection waiting for its next request is closed now (one with a
        request in flight is closed by gunicorn once it is answered)."""
        if self._awaiting_request and not self._closed:
            self._keepalive_timeout()

    def _headers_late(self) -> None:
        self._header_timer = None
        if self._current_request is None:
            self._keepalive_timeout()  # gunicorn's own "close and wake the loop"

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None


class ConsumerWorker(gasgi.ASGIWorker):
    """``worker_class`` of ``consumer.http.gunicorn_conf``."""

    def init_process(self) -> None:
        fix_mmap_threshold()
        # gunicorn's ASGI worker builds each connection's protocol by this module-level name.
        gasgi.ASGIProtocol = DeadlineProtocol
        super().init_process()

    def load_wsgi(self) -> None:
        """``consumer.http.wsgi:asgi()`` is served as is; a plain WSGI app
        (``consumer.http.wsgi:app()``, still named by older commands) is put behind the same
        bridge, with the same limits, from the settings and authenticator the app was built
        with."""
        super().load_wsgi()
        loaded: Any = getattr(self, "asgi", None)
        if isinstance(loaded, Flask):
            self.asgi = bridged(loaded)

    def handle_exit_signal(self) -> None:
        """SIGTERM: stop as gunicorn does, without waiting out idle kept-alive connections (they
        stay open 620 s, longer than the load balancer's own, and would hold the stop)."""
        super().handle_exit_signal()
        for protocol in list(DeadlineProtocol.live):
            protocol.close_if_idle()

    def header_timeout(self) -> float:
        app = getattr(self, "asgi", None)
        if isinstance(app, BufferedWsgi):
            return app.limits.header_timeout_seconds
        return DEFAULT_HEADER_TIMEOUT_SECONDS

    def notify(self) -> None:
        """Called every second by the worker's loop: the heartbeat, and the watchdog."""
        app = getattr(self, "asgi", None)
        # ``cfg.timeout`` is the ack deadline; gunicorn's own ``self.timeout`` is half of it (its
        # heartbeat interval), which would end every sweep that uses its whole budget.
        deadline = float(self.cfg.timeout)
        if isinstance(app, BufferedWsgi) and app.oldest_seconds() > deadline:
            exit_past_deadline(deadline)
        super().notify()


def exit_past_deadline(deadline: float) -> None:
    """End the worker (threads cannot be stopped; the arbiter starts a fresh one), saying why
    in a line written only if stderr has room now: nothing here waits on a lock or a reader."""
    extra = {"timeout_seconds": deadline, "pid": os.getpid()}
    try:
        record = log.makeRecord(log.name, logging.ERROR, __file__, 0, WATCHDOG_MESSAGE, (), None,
                                extra=extra)  # fmt: skip
        _write_if_room(STDERR, (_formatted(record) + "\n").encode()[:LINE_LIMIT])
    finally:
        os._exit(1)


def _formatted(record: logging.LogRecord) -> str:
    """The line as the process's log handler would format it (JSON or text), without taking
    that handler's lock."""
    for handler in logging.getLogger().handlers:
        if handler.formatter is not None:
            return handler.formatter.format(record)
    return record.getMessage()


def _write_if_room(fd: int, data: bytes) -> None:
    """One ``write`` if ``fd`` can take it without blocking; nothing otherwise."""
    try:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if poller.poll(0):
            os.write(fd, data)
    except OSError:
        pass  # no stderr to tell: exiting matters more
