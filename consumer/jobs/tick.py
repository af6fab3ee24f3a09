"""Tick task ``sweep`` (every 5 minutes by default) and the built-in job kinds."""

from __future__ import annotations

from typing import Any

from consumer.context import HandlerContext
from consumer.events import TickEvent
from consumer.jobs import email
from consumer.jobs.sweep import Sweeper
from consumer.registry import Registry

SWEEP_PERIOD_SECONDS = 300


def register(registry: Registry) -> None:
    registry.job_kinds.add("email", email.send)

    def sweep(context: HandlerContext, event: TickEvent) -> dict[str, Any]:
        """The same sweep for a tick and for ``consumer sweep --once``."""
        sweeper = Sweeper(context.settings, context.engine, registry.job_kinds)
        return {"task": event.task, **sweeper.run(context.deadline).as_dict()}

    registry.tick("sweep", period_seconds=SWEEP_PERIOD_SECONDS)(sweep)
