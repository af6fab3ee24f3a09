"""Tick task ``sweep`` (every 5 minutes by default) and the built-in job kinds.

A sweep that stops on its budget with jobs still due hands the backlog on as continuations
(``consumer.pipeline.continuation``), when ``CONSUMER_CONTINUATION_TOPIC`` is set: a tick's sweep
fans out
up to ``CONSUMER_CONTINUATION_FANOUT`` of them (as many as the backlog needs at this sweep's
pace), and each continuation's sweep publishes one more while work is left, so at most that many
chains drain a tick's backlog in parallel on whichever pods receive them.

Each sweep first re-drives the inbox rows a dead delivery left ``running`` and nobody redelivered
(``consumer.pipeline.redrive``): the sweep's tick is what brings it, so no pod polls for them."""

from __future__ import annotations

import math
from typing import Any

from consumer.config.settings import Settings
from consumer.jobs import email
from consumer.jobs.fields import EMAIL_FIELDS, kind
from consumer.jobs.limits import configured
from consumer.jobs.sweep import Sweeper, SweepSummary
from consumer.pipeline import continuation
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.redrive import redrive_in
from consumer.pipeline.registry import Registry
from consumer.wire.events import TickEvent

SWEEP_PERIOD_SECONDS = 300


def register(registry: Registry) -> None:
    registry.job_kind("email", record_each=True)(kind(email.send, EMAIL_FIELDS))

    def sweep(context: HandlerContext, event: TickEvent) -> dict[str, Any]:
        """The same sweep for a tick, a continuation and ``consumer sweep --once``."""
        settings = context.settings
        redriven = redrive_in(context, registry)
        reserve = continuation.publish_reserve(settings.jobs.continuation_topic)
        limits = configured(registry, settings)
        sweeper = Sweeper(settings, context.engine, registry.job_kinds, context.clock, limits,
                          record_each=registry.record_each_kinds)  # fmt: skip
        summary = sweeper.run(context.deadline - reserve)
        count = continuations_wanted(settings, event, summary)
        published = continuation.publish(
            settings.jobs.continuation_topic,
            {"task": event.task},
            count,
            context.remaining(),
            settings.admission.signing_secret,
        )
        return {
            "task": event.task, **summary.as_dict(), "continuations": len(published),
            "redriven": redriven,
        }  # fmt: skip

    registry.tick("sweep", period_seconds=SWEEP_PERIOD_SECONDS)(sweep)


def continuations_wanted(settings: Settings, event: TickEvent, summary: SweepSummary) -> int:
    """How many slices of this sweep's size the due backlog needs, capped: a tick's sweep fans
    out, a continuation's sweep only carries its own chain on. Jobs held back by flow control
    are not backlog: more sweepers would not start them any sooner."""
    held = sum(summary.unknown_kinds.values()) + sum(summary.throttled.values())
    backlog = summary.still_due - held
    if not settings.jobs.continuation_topic or summary.stopped != "budget" or backlog <= 0:
        return 0
    per_slice = max(1, summary.done + summary.retried + summary.dead)
    limit = 1 if event.continuation else settings.jobs.continuation_fanout
    return min(limit, math.ceil(backlog / per_slice))
