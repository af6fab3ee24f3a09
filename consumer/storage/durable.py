"""Recording work already done survives a database blip (docs/architecture.md §4).

A batch's commit (its jobs with the resume point they represent) and a file's final status record
effects that are already made: giving up on the first fault would throw the attempt's work away
and send the file back to Pub/Sub. So they are retried with backoff for as long as the delivery's
budget leaves room; nothing new is read or inserted meanwhile. A fault that outlasts the budget
ends the attempt as before (503): the redelivery resumes at the last commit.

A commit whose answer was lost may have happened. Before each retry, ``settled`` reads what the
database holds and says whether the write is already there, so it is never counted twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from consumer.errors import Unavailable
from consumer.pipeline.context import HandlerContext

T = TypeVar("T")
log = logging.getLogger("consumer.storage")

FIRST_DELAY_SECONDS = 0.1
MAX_DELAY_SECONDS = 2.0
RESERVE_SECONDS = 0.5
"""Kept back from the budget for answering after the last try."""


def durably(
    context: HandlerContext,
    write: Callable[[], T],
    what: str,
    settled: Callable[[], T | None] = lambda: None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``write()``, retried on ``Unavailable`` with exponential backoff while the budget lasts;
    before each retry, ``settled()`` returns the result if the earlier try did commit."""
    delay, tries = FIRST_DELAY_SECONDS, 1
    while True:
        try:
            return write() if tries == 1 else settled() or write()
        except Unavailable as exc:
            if context.remaining() < delay + RESERVE_SECONDS:
                raise
            log.warning("%s failed (%s); retry %d in %.1fs", what, exc, tries, delay)
            sleep(delay)
            delay, tries = min(delay * 2, MAX_DELAY_SECONDS), tries + 1
