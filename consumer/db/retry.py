"""Retrying a write that records effects already made, for as long as the claim leaves room.

A short database blip must not turn into a second run of the effect: the write is retried with
backoff until ``deadline`` (a ``time.monotonic()`` value the caller derives from its lease), and
only then gives up. Nothing new is started meanwhile: the caller is blocked here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from consumer.errors import Unavailable

log = logging.getLogger("consumer.db.retry")
T = TypeVar("T")
FIRST_DELAY_SECONDS = 0.05
MAX_DELAY_SECONDS = 1.0


def until_deadline(
    write: Callable[[], T],
    deadline: float,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``write()``, retried on ``Unavailable`` with doubling delays (capped at a second) while
    ``deadline`` leaves room for another try; the last ``Unavailable`` propagates."""
    delay, tries = FIRST_DELAY_SECONDS, 1
    while True:
        try:
            return write()
        except Unavailable:
            if time.monotonic() + delay >= deadline:
                log.warning("giving up recording %s after %d tries", what, tries)
                raise
        sleep(delay)
        delay, tries = min(delay * 2, MAX_DELAY_SECONDS), tries + 1
