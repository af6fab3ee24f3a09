"""The deploy handler: run every cache warmer that applies to the release, record each run.

Warmers live in the registry (``registry.warmers``), given to the handler when it is built; a
plugin adds its own with::

    from consumer import WarmReport

    def register(registry):
        @registry.warmer("search", services={"web"})
        def warm_search(context, event) -> WarmReport | None: ...

A warmer returns a ``WarmReport`` (or ``None``: nothing to warm for this release). A warmer that
raises is recorded as failed and the others still run: by then some caches are warm, and a
redelivery would warm them twice, so a warming failure never asks Pub/Sub for a retry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from consumer.deploy.http_warmer import HttpWarmer
from consumer.deploy.report import TargetResult, WarmReport
from consumer.deploy.store import WarmRuns
from consumer.errors import LeaseLost, Skip
from consumer.observe import metrics
from consumer.outbound.budget import RESERVE_SECONDS
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.extensions import Warmers, WarmerSpec
from consumer.pipeline.registry import Registry
from consumer.wire.events import DeployEvent

log = logging.getLogger("consumer.deploy")

Warmer = Callable[[HandlerContext, DeployEvent], WarmReport | None]


class CacheWarming:
    """The registered deploy handler."""

    def __init__(self, warmers: Warmers) -> None:
        self.warmers = warmers

    def __call__(self, context: HandlerContext, event: DeployEvent) -> dict[str, Any]:
        store, summaries = WarmRuns(context.engine), []
        for spec in self.warmers.for_service(event.service):
            started_at = context.clock()
            report = run_warmer(spec, context, event)
            if report is not None:
                summaries.append(record(store, event, context.attempt, started_at, report))
        if not summaries:
            raise Skip(f"no cache warmer has targets for service {event.service!r}")
        return {
            "service": event.service,
            "release": event.release,
            "environment": event.environment,
            "warmers": summaries,
        }


def record(
    store: WarmRuns, event: DeployEvent, attempt: int, started_at: datetime, report: WarmReport
) -> dict[str, Any]:
    """Record the run and return its summary. The caches are warm by now, so a failure to record
    (even a database outage) is logged and noted, never raised: raising would make Pub/Sub
    redeliver and warm everything again. The database's error text stays in the log."""
    metrics.warm_run(report)
    try:
        store.record(event, attempt, started_at, report)
    except Exception as exc:
        log.error("warm run of %s by %s not recorded", event.key, report.warmer, exc_info=True)
        why = f"run not recorded ({type(exc).__name__})"
        note = "; ".join(filter(None, [report.note, why]))
        return replace(report, note=note).summary()
    return report.summary()


def run_warmer(spec: WarmerSpec, context: HandlerContext, event: DeployEvent) -> WarmReport | None:
    """Run one warmer within the budget; its failure becomes a failed report."""
    if context.remaining() < RESERVE_SECONDS:
        return WarmReport(spec.name, note="not started: the time budget was used up")
    started = time.monotonic()
    try:
        report = spec.warmer(context, event)
    except LeaseLost:
        raise
    except Exception as exc:
        log.warning("cache warmer %s failed for %s", spec.name, event.key, exc_info=True)
        elapsed = time.monotonic() - started
        failure = TargetResult(spec.name, False, elapsed, error=f"{type(exc).__name__}: {exc}")
        return WarmReport(spec.name, (failure,), duration_seconds=elapsed, note="warmer raised")
    if report is None:
        return None
    elapsed = report.duration_seconds or time.monotonic() - started
    return replace(report, warmer=spec.name, duration_seconds=elapsed)


def register(registry: Registry) -> None:
    """Install the cache-warming deploy handler with the built-in HTTP warmer. The handler reads
    the registry's warmer table, so warmers added later (by plugins) run too."""
    registry.warmers.add("http", HttpWarmer())
    registry.deploy(CacheWarming(registry.warmers))


def warmers_of(registry: Registry) -> Warmers:
    """``registry.warmers``, under the name plugins used before the registry held it."""
    return registry.warmers
