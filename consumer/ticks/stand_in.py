"""The one Cloud Scheduler stand-in: its loop, and the local tick source that publishes ``sweep``
and ``cleanup`` ticks over HTTP with it (``consumer serve --local``, ``scripts/dev``).

The loop owns when rounds fire (the pace, an optional first round at once, an optional count, the
stop); a stand-in supplies only its publish function, which handles its own failures: a failed
round is a missed round, as Scheduler may miss one. The other two publishers run this same loop
and differ only in how a round is published: the demo's (``consumer.demo.scheduler``: each tick
twice, through the Pub/Sub emulator or posted with redelivery) and the local stack's
(``triggers.local.scheduler``: to an emulator topic, rounds aligned like a cron job's).
"""

from __future__ import annotations

import enum
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import requests

from consumer.wire.envelopes_out import tick_body

log = logging.getLogger("consumer.ticker")
LOCAL_TASKS = ("sweep", "cleanup")


class Pace(enum.Enum):
    AFTER = "after"  # a full interval after each round ends
    RATE = "rate"  # an interval after each round starts: time spent publishing is made up
    ALIGNED = "aligned"  # on multiples of the interval since the epoch, like a */N cron job


@dataclass(frozen=True)
class Schedule:
    every: float
    pace: Pace = Pace.AFTER
    first_now: bool = False
    count: int = 0  # rounds to publish; 0: until stopped

    def delay(self, started: float, now: float) -> float:
        """Seconds from ``now`` to the next round when the last one started at ``started``."""
        if self.pace is Pace.ALIGNED:
            return next_round(now, self.every) - now
        if self.pace is Pace.RATE:
            return max(0.0, self.every - (now - started))
        return self.every

    def clock(self) -> float:
        """Epoch seconds when rounds align to the epoch, else a clock that never jumps."""
        return time.time() if self.pace is Pace.ALIGNED else time.monotonic()


def next_round(now: float, every: float) -> float:
    """The first multiple of ``every`` seconds since the epoch after ``now``."""
    return (math.floor(now / every) + 1) * every


class Stopping(Protocol):
    """A ``threading.Event``, as the loop uses it: wait up to ``timeout``, True once stopped."""

    def wait(self, timeout: float) -> bool: ...


def run_rounds(
    schedule: Schedule,
    publish: Callable[[], None],
    stopping: Stopping,
    clock: Callable[[], float] | None = None,
) -> int:
    """Publishes rounds until ``stopping`` is set or ``count`` rounds are done; returns them."""
    now_of = clock or schedule.clock
    now = now_of()
    delay = 0.0 if schedule.first_now else schedule.delay(now, now)
    rounds = 0
    while (schedule.count == 0 or rounds < schedule.count) and not stopping.wait(delay):
        started = now_of()
        publish()
        rounds += 1
        delay = schedule.delay(started, now_of())
    return rounds


class LocalTicker:
    """``scripts/dev``'s and ``consumer serve --local``'s ticks: a round a full interval after
    the last one ends, the first an interval after start."""

    def __init__(self, url: str, interval_seconds: int, tasks: tuple[str, ...] = LOCAL_TASKS):
        self.url = url
        self.interval = interval_seconds
        self.tasks = tasks
        self._stopped = threading.Event()

    def run(self) -> None:
        run_rounds(Schedule(self.interval), self.publish_round, self._stopped)

    def publish_round(self) -> None:
        for task in self.tasks:
            self.tick(task)

    def tick(self, task: str) -> None:
        try:
            response = requests.post(self.url, json=tick_body(task), timeout=30)
            # Debug only: the worker's decision line is the one line a tick writes.
            log.debug("tick %s -> %s %s", task, response.status_code, response.text.strip())
        except requests.RequestException as exc:
            log.warning("tick %s failed: %s", task, exc)

    def stop(self) -> None:
        self._stopped.set()
