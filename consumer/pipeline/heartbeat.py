"""One heartbeat per process for the inbox leases of the deliveries in flight.

An inbox claim's lease is short (``CONSUMER_INBOX_LEASE_SECONDS``, a few seconds), so the claim of
a pod that was killed is taken over by the next redelivery within seconds. A live delivery keeps
its claim because this thread renews it every second while its handler runs. A delivery that ends
within a second (most do) is never renewed: the hot path pays for a dictionary entry, not a write.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

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


class Heartbeats:
    """Renews, from one daemon thread (started in each process on first use), every claim held
    in a ``kept`` block whose last renewal is ``every`` seconds old."""

    def __init__(self, every: float = EVERY_SECONDS) -> None:
        self.every = every
        self._beats: dict[int, Beat] = {}
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        self._pid = 0

    @contextmanager
    def kept(self, renew: Callable[[], bool]) -> Iterator[None]:
        """Keep a claim's lease fresh while the block runs."""
        number = next(self._numbers)
        with self._lock:
            self._beats[number] = Beat(renew, time.monotonic())
            if self._pid != os.getpid():  # first use here (a forked worker has no thread)
                self._pid = os.getpid()
                threading.Thread(target=self._run, name="inbox-lease", daemon=True).start()
        try:
            yield
        finally:
            with self._lock:
                self._beats.pop(number, None)

    def _run(self) -> None:
        while True:
            time.sleep(TICK_SECONDS)
            now = time.monotonic()
            with self._lock:
                due = [(n, b) for n, b in self._beats.items() if now - b.last >= self.every]
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
