"""Keeping a long file inside its time budget (docs/architecture.md §4).

While a file is read and processed the inbox lease is renewed every quarter lease, so a
redelivery sees a live lease (409) and cannot start a second copy. Before each unit of work the
processor asks whether the budget still covers it; if not, it stops at its last checkpoint and
raises ``BudgetExhausted``. When the attempt committed progress, the handler hands the rest on
as a continuation (``consumer.storage.continued``, acknowledged) if a topic is set, else
re-raises it as ``consumer.errors.Incomplete``: nacked, and the redelivery resumes where it
stopped (the attempt is refunded); a stop that advanced nothing spends an attempt like any retry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from consumer.errors import Retryable, Unavailable
from consumer.pipeline import continuation
from consumer.pipeline.context import HandlerContext

MIN_RESERVE_SECONDS = 0.5
RETRY_BEAT_SECONDS = 1.0
log = logging.getLogger("consumer.storage")


class BudgetExhausted(Retryable):
    """The time budget ran out; the work done so far is committed and a retry resumes it."""


class Pacer:
    """Heartbeats the inbox lease when due and guards the remaining budget."""

    def __init__(self, context: HandlerContext, clock: Callable[[], float] = time.monotonic):
        self.context = context
        self.clock = clock
        self.every = max(context.settings.lease_seconds / 4, 1.0)
        topic = context.settings.jobs.continuation_topic
        self.reserve = MIN_RESERVE_SECONDS + continuation.publish_reserve(topic)
        self.last_beat = clock()

    def tick(self) -> None:
        """Renew the lease if a quarter of it has passed; raise ``LeaseLost`` if it is gone.
        A renewal the database cannot take (a blip) is tried again a second later: the lease
        still has three quarters to run, and every write of the run is fenced anyway."""
        if self.clock() - self.last_beat >= self.every:
            try:
                self.context.heartbeat()
            except Unavailable as exc:
                log.warning("could not renew the lease of %s (%s)", self.context.key, exc)
                self.last_beat = self.clock() - self.every + RETRY_BEAT_SECONDS
                return
            self.last_beat = self.clock()

    def ensure(self, seconds: float, where: str) -> None:
        """Raise ``BudgetExhausted`` unless the budget covers ``seconds`` more of work."""
        self.tick()
        remaining = self.context.remaining()
        if remaining < seconds + self.reserve:
            raise BudgetExhausted(
                f"time budget exhausted ({remaining:.1f}s left) {where}; a retry resumes there"
            )

    def guard(self, where: str) -> Callable[[], None]:
        """A callback for long I/O (each chunk read): heartbeat when due, stop when spent."""
        return lambda: self.ensure(0.0, where)
