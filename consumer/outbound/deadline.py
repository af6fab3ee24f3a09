"""A wall-clock deadline for a whole HTTP exchange: connect, request, headers and body.

requests' ``timeout`` bounds each socket operation, not the exchange: a server that sends one
byte of its headers or body every half second keeps every read under the timeout and the call
open for as long as it likes. Here a timer shuts the connection's socket down when the deadline
passes, whatever the exchange is waiting for; the blocked read then fails at once, and
``Deadline.expired`` tells the caller that the failure was the deadline's.

Sessions opt in with ``deadline_session()`` (their adapter makes connections that report to the
deadline of the thread using them), then run each exchange inside ``with Deadline(at):``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from types import TracebackType
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

CONNECT_FLOOR_SECONDS = 0.001
"""A connect started at or after the deadline still gets this long (a timeout of 0 would make
the socket non-blocking, a different failure), then fails as a timeout."""

_current = threading.local()
"""The deadline of the exchange this thread is running, if any."""


class Deadline:
    """Ends the exchange run inside it at monotonic time ``at``."""

    def __init__(self, at: float) -> None:
        self.at = at
        self.expired = False
        self.abandoned = False
        """``abandon`` ended the exchange before its deadline (a cancelled job's call)."""
        self._lock = threading.Lock()
        self._connection: HTTPConnection | None = None
        self._timer = threading.Timer(max(0.0, at - time.monotonic()), self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        _current.deadline = self
        self._timer.start()
        return self

    def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._timer.cancel()
        _current.deadline = None
        with self._lock:
            if self.expired and self._connection is not None:
                self._connection.close()  # half shut down: never reused from the pool

    def left(self) -> float:
        return self.at - time.monotonic()

    def watch(self, connection: HTTPConnection) -> None:
        """The connection the exchange now uses; shut at once when the deadline has passed."""
        with self._lock:
            self._connection = connection
            if self.expired:
                _shut(connection)

    def abandon(self) -> None:
        """End the exchange now, from any thread: its connection is shut, never reused."""
        self.abandoned = True
        self._expire()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            if self._connection is not None:
                _shut(self._connection)


def deadline_session() -> requests.Session:
    """A session whose exchanges end at the ``Deadline`` they run in (none: as requests does)."""
    session = requests.Session()
    for prefix in ("http://", "https://"):
        session.mount(prefix, _Adapter())
    return session


def _shut(connection: HTTPConnection) -> None:
    """Shut the socket down (closing alone does not wake a thread blocked reading it)."""
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed
            sock.shutdown(socket.SHUT_RDWR)


def _watched(connection: HTTPConnection) -> None:
    deadline: Deadline | None = getattr(_current, "deadline", None)
    if deadline is not None:
        deadline.watch(connection)


class _Watched(HTTPConnection):
    """Reports itself to the thread's deadline on every request (a pooled connection is reused
    without connecting again) and once connected (the socket exists only then). Until then no
    socket exists for the timer to shut, so the connect's own timeout is cut to the time left."""

    def connect(self) -> None:
        deadline: Deadline | None = getattr(_current, "deadline", None)
        if deadline is not None:
            left = max(CONNECT_FLOOR_SECONDS, deadline.left())
            given = self.timeout
            self.timeout = min(given, left) if isinstance(given, int | float) else left
        super().connect()
        _watched(self)

    def request(self, *args: Any, **kwargs: Any) -> None:
        _watched(self)
        super().request(*args, **kwargs)


class _WatchedTLS(_Watched, HTTPSConnection):
    pass


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Watched


class _TLSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedTLS


class _Adapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _Pool, "https": _TLSPool}
