"""Tick task ``cleanup``: purge finished inbox rows and jobs past their retention."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from consumer.context import HandlerContext
from consumer.events import TickEvent
from consumer.inbox import Inbox
from consumer.jobs import store as jobs_store
from consumer.registry import Registry
from consumer.timeutil import utcnow

DAY = 24 * 3600


def cleanup(context: HandlerContext, event: TickEvent) -> dict[str, Any]:
    retention = timedelta(seconds=context.settings.inbox_retention_seconds)
    purged = Inbox(context.engine).purge(finished_before=utcnow() - retention)
    job_retention = timedelta(seconds=context.settings.job_retention_seconds)
    jobs_purged = jobs_store.purge(context.engine, finished_before=utcnow() - job_retention)
    return {"task": event.task, "inbox_purged": purged, "jobs_purged": jobs_purged}


def register(registry: Registry) -> None:
    registry.tick("cleanup", period_seconds=DAY)(cleanup)
