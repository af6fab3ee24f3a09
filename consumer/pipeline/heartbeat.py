"""One heartbeat per process for the inbox leases of the deliveries in flight.

An inbox claim's lease is short (``CONSUMER_INBOX_LEASE_SECONDS``, a few seconds), so the claim of
a pod that was killed is taken over by the next redelivery within seconds. A live delivery keeps
its claim because this thread renews it every second while its handler runs. A delivery that ends
within a second (most do) is never renewed: the hot path pays for a dictionary entry, not a write.

Every beat ends: a claim is renewed up to its delivery's deadline and never past it, so a handler
that never returns loses its lease about one lease after the ack deadline, and the redelivery
Pub/Sub makes by then takes the row over (only the process's death ended such a beat before).
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType

log = logging.getLogger("consumer.heartbeat")
EVERY_SECONDS = 1.0
"""How often a live claim is renewed; the lease must outlast a few of these."""
TICK_SECONDS = 0.25


@dataclass
class Beat:
    renew: Callable[[], bool]
    """Pushes the lease forward; ``False``: it was taken over (nothing more to renew)."""
    last: float
    """``time.monotonic()`` of the claim or its last renewal."""
    until: float = math.inf
    """``time.monotonic()`` of the delivery's deadline: no renewal past it."""


class Heartbeats:
    """Renews, from one daemon thread, every claim held in a ``kept`` block whose last renewal
    is ``every`` seconds old. The thread runs while claims are held, and ends when none is."""

    def __init__(self, every: float = EVERY_SECONDS, tick: float = TICK_SECONDS) -> None:
        self.every, self.tick = every, tick
        self._beats: dict[int, Beat] = {}
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        self._running_in = 0
        """The process whose thread is running (0: none; a forked worker starts its own)."""

    def kept(
        self, renew: Callable[[], bool], until: float = math.inf
    ) -> AbstractContextManager[None]:
        """Keep a claim's lease fresh while the block runs, until ``until`` at the latest (a
        ``time.monotonic()`` value: the delivery's deadline)."""
        return _Kept(self, renew, until)

    def _hold(self, renew: Callable[[], bool], until: float) -> int:
        number = next(self._numbers)
        with self._lock:
            self._beats[number] = Beat(renew, time.monotonic(), until)
            if self._running_in != os.getpid():
                self._start()
        return number

    def _start(self) -> None:
        """Start this process's thread (the lock held). A thread that could not start (no
        memory, a thread limit) is tried again at the next claim: the process is marked as
        running one only once it does."""
        thread = threading.Thread(target=self._run, name="inbox-lease", daemon=True)
        try:
            thread.start()
        except RuntimeError as exc:
            log.warning("inbox lease heartbeat not started, tried again at the next claim: %s", exc)
            return
        self._running_in = os.getpid()

    def _release(self, number: int) -> None:
        with self._lock:
            self._beats.pop(number, None)

    def _run(self) -> None:
        while True:
            time.sleep(self.tick)
            now = time.monotonic()
            with self._lock:
                if not self._beats:
                    self._running_in = 0
                    return
                ended = [n for n, b in self._beats.items() if now >= b.until]
                for number in ended:  # the delivery's deadline: its lease is let lapse
                    del self._beats[number]
                due = [(n, b) for n, b in self._beats.items() if now - b.last >= self.every]
            if ended:
                log.warning(
                    "%d inbox lease(s) not renewed past their delivery's deadline", len(ended)
                )
            for number, beat in due:
                self._renew(number, beat)

    def _renew(self, number: int, beat: Beat) -> None:
        started = time.monotonic()
        try:
            kept = beat.renew()
        except Exception as exc:  # a failed beat (a blip) is tried again at the next tick
            log.warning("inbox lease not renewed: %s", exc)
            return
        beat.last = started
        if not kept:
            with self._lock:
                self._beats.pop(number, None)


class _Kept:
    """One ``kept`` block: a class, not a generator, as every delivery enters one."""

    def __init__(self, heartbeats: Heartbeats, renew: Callable[[], bool], until: float) -> None:
        self.heartbeats, self.renew, self.until, self.number = heartbeats, renew, until, -1

    def __enter__(self) -> None:
        self.number = self.heartbeats._hold(self.renew, self.until)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, _: TracebackType | None
    ) -> None:
        self.heartbeats._release(self.number)
