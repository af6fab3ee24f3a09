"""One large request body at a time in the whole server (all workers), to bound the pod's memory.

A 14 MiB push costs a worker about 150 MiB at its peak (the body, its copies, the parsed JSON,
the decoded data, the stored row). Two workers at that peak at once would not leave the pod's
512 MiB with room to spare, so a large body is read and handled only while its worker holds an
exclusive ``flock`` shared by every worker of the same server (keyed by the arbiter's PID).
Large bodies are rare (Pub/Sub pushes are typically kilobytes), so the wait is rare too; a
request that cannot get the slot within its body deadline gets a 503 and Pub/Sub retries.
Freed memory is handed back to the system afterwards (a fixed glibc mmap threshold and
``malloc_trim``), so a worker does not sit at its peak while the other one takes its turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import fcntl
import gc
import os
import tempfile
import time
from collections.abc import AsyncIterator

POLL_SECONDS = 0.02
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number
MMAP_THRESHOLD_BYTES = 128 * 1024


class SlotTimeout(Exception):
    """The slot was not free before the deadline."""


@contextlib.asynccontextmanager
async def large_body_slot(deadline: float) -> AsyncIterator[None]:
    """Hold the server-wide slot; ``deadline`` is a ``time.monotonic()`` value."""
    path = os.path.join(tempfile.gettempdir(), f"consumer-large-body-{os.getppid()}.lock")
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while not _try_lock(descriptor):
            if time.monotonic() >= deadline:
                raise SlotTimeout()
            await asyncio.sleep(POLL_SECONDS)
        try:
            yield
        finally:
            fcntl.flock(descriptor, fcntl.LOCK_UN)
            _trim()
    finally:
        os.close(descriptor)


def _try_lock(descriptor: int) -> bool:
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _trim() -> None:
    gc.collect()  # what a large request left in reference cycles, before memory is handed back
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def fix_mmap_threshold() -> None:
    """Serve every block over 128 KiB from its own mapping, returned to the system when freed.
    glibc otherwise raises its threshold after the first large free, and later 14 MiB bodies
    come from the heap, where freed memory stays with the process."""
    if _LIBC is not None:
        _LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        library = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return library if library is not None and hasattr(library, "malloc_trim") else None


_LIBC = _libc()
