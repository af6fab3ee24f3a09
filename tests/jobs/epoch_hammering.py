"""What the epoch hammers share (``test_epoch_hammer``, ``test_epoch_debounce_retry``): threads
whose errors reach the test, the switch at a random moment, and the query for two pending jobs
of one debounce key."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import Engine, func, select

from consumer.jobs import epochs
from consumer.jobs.schema import jobs
from consumer.wire.timeutil import utcnow

HOLD = 0.02
"""How long a writer's transaction stays open after its inserts."""
SWITCH_WITHIN = 30.0


class Threads:
    """Threads started together; the first error any of them raised is raised on ``join``."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def start(self, target: Callable[[], None]) -> None:
        def run() -> None:
            try:
                target()
            except BaseException as exc:  # reported by join
                self.errors.append(exc)

        self.threads.append(thread := threading.Thread(target=run))
        thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join()
        if self.errors:  # the cause first, not a barrier it broke
            raise sorted(self.errors, key=lambda e: isinstance(e, threading.BrokenBarrierError))[0]


def switch_soon(engine: Engine, least: float, most: float) -> int:
    """After a random wait of ``least`` to ``most`` s, the next epoch, tried until its lock is
    granted (writers keep the table busy)."""
    time.sleep(random.uniform(least, most))
    assert epochs.make_next(engine) is not None
    deadline = time.monotonic() + SWITCH_WITHIN
    while (epoch := epochs.switch(engine, utcnow(), timedelta(0))) is None:
        assert time.monotonic() < deadline, "no switch within SWITCH_WITHIN"
    return epoch


TWO_PENDING = (
    select(jobs.c.debounce_key)
    .where(jobs.c.debounce_key.is_not(None), jobs.c.status == "pending")
    .group_by(jobs.c.debounce_key)
    .having(func.count() > 1)
)
