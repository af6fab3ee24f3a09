"""The chaos run's witnesses: a real SMTP server that stamps each accepted message with the time
it arrived, and the Node.js target (``bench/support/target_server.js``), whose calls are read
every couple of seconds and stamped when first seen. Both can be told to stall or fail for a
spell."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import requests
from aiosmtpd.smtp import Envelope, Session

from bench.support import smtp_server
from bench.support.smtp_server import Recorder
from bench.support.target_servers import NodeTarget

SMTP_FAIL_REPLY = "451 4.3.0 Try again later"
SMTP_STALL_SECONDS = 3.0
TARGET_STALL_MS = 3000
CALL_POLL_SECONDS = 2.0


@dataclass
class TimedRecorder(Recorder):
    """Records ``(Message-ID, arrival)`` for every message it accepts (after any stall)."""

    arrivals: list[tuple[str, float]] = field(default_factory=list)
    stall_seconds: float = SMTP_STALL_SECONDS

    async def handle_DATA(self, server: Any, session: Session, envelope: Envelope) -> str:
        before = len(self.ids)
        answer = await super().handle_DATA(server, session, envelope)
        with self.lock:
            self.arrivals.extend((id_, time.time()) for id_ in self.ids[before:])
        return answer

    def stamped(self) -> list[tuple[str, float]]:
        with self.lock:
            return list(self.arrivals)

    def spell(self, kind: str) -> None:
        """``fail``: every message refused with a 451; ``stall``: each answered seconds late."""
        if kind == "fail":
            self.reply = SMTP_FAIL_REPLY
        else:
            self.delay = self.stall_seconds

    def heal(self) -> None:
        self.reply, self.delay = "", 0.0


@contextmanager
def mail_sink() -> Iterator[TimedRecorder]:
    recorder = TimedRecorder()
    controller = smtp_server.start(recorder)
    try:
        yield recorder
    finally:
        controller.stop()


@dataclass(frozen=True)
class Call:
    key: str
    path: str
    outcome: str
    """``done`` (the effect), ``duplicate`` (a repeat of a done key, dropped), or a failure."""
    seen: float


class Target:
    """The Node.js target, plus a thread that stamps its calls as they appear."""

    stall_seconds = TARGET_STALL_MS / 1000

    def __init__(self) -> None:
        self.node = NodeTarget()
        self.url = self.node.url
        self._calls: list[Call] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="chaos-calls", daemon=True)
        self._poller.start()

    def close(self) -> None:
        self._stopping.set()
        self._poller.join(timeout=30)
        self.node.stop()

    def spell(self, kind: str) -> None:
        """``fail``: every call answered 500; ``stall``: no answer, the connection reset after
        a few seconds (past the declared timeout)."""
        mode = "500" if kind == "fail" else "stall"
        self.node.control(fail={mode: 1.0}, stall_ms=TARGET_STALL_MS)

    def heal(self) -> None:
        self.node.control(fail={})

    def calls(self) -> list[Call]:
        """Every call so far, read now (so none is missed at the end)."""
        self._read()
        with self._lock:
            return list(self._calls)

    def _poll(self) -> None:
        while not self._stopping.wait(CALL_POLL_SECONDS):
            with suppress(requests.RequestException, ValueError):
                self._read()

    def _read(self) -> None:
        raw = self.node.calls()
        now = time.time()
        with self._lock:
            fresh = raw[len(self._calls) :]
            self._calls += [
                Call(str(call["key"]).strip('"'), str(call["path"]), str(call["outcome"]), now)
                for call in fresh
            ]
