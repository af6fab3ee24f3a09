"""A plugin for the dashboard tests, loaded by the test process and by the dashboard server
(``CONSUMER_PLUGINS=tests.dashboard.plugin``).

- deploy handler: fails permanently while the file named by ``DASHBOARD_TEST_SWITCH`` is absent
  (so events go dead, and a replay after the "fix" succeeds); otherwise records a warm run;
- job kind ``report``: fails permanently when its payload says ``{"fail": true}``;
- tick task ``late-task``: registered only where ``DASHBOARD_TEST_LATE_TASK=1`` (the dashboard
  server), so its ticks are unroutable in the test process and replayable in the server.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from consumer import Job
from consumer.deploy.report import TargetResult, WarmReport
from consumer.deploy.store import WarmRuns
from consumer.errors import Permanent
from consumer.jobs.kinds import JobContext
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.registry import Registry
from consumer.wire.events import DeployEvent, TickEvent
from consumer.wire.timeutil import utcnow


def on_deploy(context: HandlerContext, event: DeployEvent) -> dict[str, Any]:
    switch = os.environ.get("DASHBOARD_TEST_SWITCH", "")
    if not switch or not Path(switch).exists():
        raise Permanent(f"release {event.release} cannot be warmed yet")
    report = WarmReport(
        "http",
        (TargetResult("https://shop.example/", True, 0.05, status=200),),
        duration_seconds=0.05,
    )
    WarmRuns(context.engine).record(event, context.attempt, utcnow(), report)
    return {"warmed": 1}


def report(context: JobContext, job: Job) -> None:
    if isinstance(job.payload, dict) and job.payload.get("fail"):
        raise Permanent("the report template is missing")


def late_task(context: HandlerContext, event: TickEvent) -> dict[str, Any]:
    return {"task": event.task, "ran": True}


def register(registry: Registry) -> None:
    registry.deploy(on_deploy, replace=True)
    registry.job_kinds.add("report", report)
    if os.environ.get("DASHBOARD_TEST_LATE_TASK") == "1":
        registry.tick("late-task", period_seconds=60)(late_task)
