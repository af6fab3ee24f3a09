"""Tick tasks for the tick-control tests (``CONSUMER_PLUGINS=tests.ticks.plugin``).

- ``report`` (every 60 s): records what it was run for (its slot, catch-up range, run-now id);
- ``slow`` (every 60 s, overlap ``skip``) and ``slow-wait`` (overlap ``wait``): hold their run
  until the file named by ``TICK_TEST_RELEASE`` exists (at most 30 s), so a test can keep a run
  going while other deliveries arrive.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from consumer.pipeline.context import HandlerContext
from consumer.pipeline.registry import Registry
from consumer.wire.events import TickEvent

HOLD_SECONDS = 30.0


def ran(event: TickEvent) -> dict[str, Any]:
    return {
        "slot": event.slot.isoformat(),
        "catch_up": event.payload.get("catch_up"),
        "run_now": event.run_now,
    }


def report(context: HandlerContext, event: TickEvent) -> dict[str, Any]:
    return ran(event)


def slow(context: HandlerContext, event: TickEvent) -> dict[str, Any]:
    release = os.environ.get("TICK_TEST_RELEASE", "")
    deadline = time.monotonic() + HOLD_SECONDS
    while release and not Path(release).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return ran(event)


def register(registry: Registry) -> None:
    registry.tick("report", period_seconds=60)(report)
    registry.tick("slow", period_seconds=60, overlap="skip")(slow)
    registry.tick("slow-wait", period_seconds=60, overlap="wait")(slow)
