"""Database cuts made at a chosen moment: a ``Cutter`` stops a ``TcpProxy`` for a fixed time, and
triggers decide when: the N-th statement of a kind the proxy forwards, or the N-th effect a sink
(SMTP server, HTTP target) sees. Shared by the fault tests and ``bench/fault_matrix.py``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from aiosmtpd.smtp import Envelope, Session

from bench.support.deploy_targets import TargetServer
from bench.support.smtp_server import Recorder
from bench.support.tcpproxy import TcpProxy


class Cutter:
    """Cuts the proxy once, for ``seconds``; remembers when the cut started and ended."""

    def __init__(self, proxy: TcpProxy, seconds: float) -> None:
        self.proxy, self.seconds = proxy, seconds
        self.started: float | None = None
        self.ended = threading.Event()
        self._lock = threading.Lock()
        self._ended_at = 0.0

    def cut(self) -> None:
        with self._lock:
            if self.started is not None:
                return
            self.started = time.monotonic()
        self.proxy.stop()
        restore = threading.Timer(self.seconds, self._restore)
        restore.daemon = True
        restore.start()

    def _restore(self) -> None:
        self.proxy.start()
        self._ended_at = time.monotonic()
        self.ended.set()

    @property
    def made(self) -> bool:
        return self.started is not None

    @property
    def length(self) -> float:
        """How long the database was really unreachable (0 when no cut was made)."""
        if self.started is None or not self.ended.is_set():
            return 0.0
        return self._ended_at - self.started


def at_nth(cutter: Cutter, nth: int) -> Callable[[int], None]:
    """A sink hook: called with the number of the effect about to be accepted."""

    def hook(number: int) -> None:
        if number == nth:
            cutter.cut()

    return hook


def on_statement(
    cutter: Cutter, match: Callable[[bytes], bool], nth: int
) -> Callable[[bytes], None]:
    """A proxy watch: cuts before the ``nth`` matching statement reaches PostgreSQL, so that
    statement (and its transaction) meets the cut. Statements are matched on their text, which
    psycopg sends for the first five runs of a statement on a connection (then it prepares it),
    so ``nth`` should stay small."""
    seen = 0
    lock = threading.Lock()

    def watch(chunk: bytes) -> None:
        nonlocal seen
        if not match(chunk):
            return
        with lock:
            seen += 1
            now = seen
        if now == nth:
            cutter.cut()

    return watch


def sql(*parts: bytes, without: bytes = b"") -> Callable[[bytes], bool]:
    """Matches a chunk holding every one of ``parts`` (and not ``without``)."""
    return lambda chunk: all(p in chunk for p in parts) and not (without and without in chunk)


class HookedRecorder(Recorder):
    """An SMTP sink that calls ``before(n)`` before it accepts its n-th message: a cut made there
    means the sender hears "250" only once the database is gone."""

    before: Callable[[int], None] = staticmethod(lambda number: None)

    async def handle_DATA(self, server: Any, session: Session, envelope: Envelope) -> str:
        self.before(len(self.message_ids()) + 1)
        return await super().handle_DATA(server, session, envelope)


class HookedTargets(TargetServer):
    """Warm targets that call ``before(n)`` on their n-th hit (any path), before answering it."""

    def __init__(self, delay: float = 0.005) -> None:
        super().__init__(delay=delay)
        self.before: Callable[[int], None] = lambda number: None
        self.total = 0

    def enter(self, path: str, headers: dict[str, str]) -> int:
        hit = super().enter(path, headers)
        with self.lock:
            self.total += 1
            number = self.total
        self.before(number)
        return hit
