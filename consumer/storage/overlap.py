"""Write one batch while the next is read: a single background writer, in order.

An import spends its time in two places that need not wait for each other: Python reading,
parsing and validating rows, and the database storing the previous batch. With one writer
thread the two overlap (the driver releases the GIL while it waits on the socket), so a file
goes about as fast as the slower of the two instead of their sum. Batches still commit one at a
time and in order, at most two are held in memory, and a failed write surfaces in the reading
thread at the next batch or at the end, never later.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType

BEAT_WAIT_SECONDS = 0.5


class Overlapped:
    """``submit`` waits for the previous write, then starts this one (inline when not
    ``background``: SQLite has one writer anyway)."""

    def __init__(self, background: bool, beat: Callable[[], None] = lambda: None) -> None:
        self._pool = ThreadPoolExecutor(1, "consumer-import-writer") if background else None
        self._pending: Future[None] | None = None
        self._beat = beat
        """Called while waiting (the lease heartbeat): a slow write must not let the lease lapse."""

    def submit(self, write: Callable[[], None]) -> None:
        self.wait()
        if self._pool is None:
            write()
        else:
            self._pending = self._pool.submit(write)

    def wait(self) -> None:
        """Block until the write in flight is done; raise what it raised."""
        pending, self._pending = self._pending, None
        while pending is not None:
            try:
                pending.result(timeout=BEAT_WAIT_SECONDS)
                return
            except TimeoutError:
                self._beat()

    def __enter__(self) -> Overlapped:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        """The write in flight finishes before the caller goes on, whatever stopped it: what
        it committed is what the next attempt resumes from. Its error wins over the caller's
        (a lost lease matters more than a spent budget)."""
        try:
            self.wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown()
