"""The decision log: every delivery's decision, whatever its source, is written once as one line
of a fixed schema and counted once in the metrics. The dispatcher (``consumer.pipeline.dispatch``)
decides; this module only writes and counts, a refusal too (``refuse``), whoever refused: the
transport's header gate, a view that could not parse, or the dispatcher."""

from __future__ import annotations

import logging
import time
from enum import StrEnum

from consumer.errors import ConsumerError
from consumer.observe import metrics
from consumer.wire.outcomes import NO_ROUTE, Outcome, from_error

log = logging.getLogger("consumer.decisions")
"""Not the module's name: operators filter the decision lines on this one (docs/operations.md)."""


class Source(StrEnum):
    """Where a delivery came from; only the adapters differ, the decision is the same."""

    PUSH = "push"
    HOOK = "hook"
    TICKS = "ticks"
    """``POST /ticks/<task>``: a tick from a scheduler that calls HTTP (``consumer.ticks.hook``)."""
    PULL = "pull"
    REPLAY = "replay"
    REDRIVE = "redrive"
    """The service's run of a stored message nobody redelivered (``consumer.pipeline.redrive``)."""
    CLI = "cli"
    """A manual run from the command line (``consumer sweep --once``)."""
    NOTIFY = "notify"
    """A sweep the service starts itself when a job's enqueue commits (``consumer.jobs.listen``)."""


def record(source: Source, outcome: Outcome, message_id: str | None, seconds: float) -> None:
    """Count the decision and log its one line (source, route, message_id, key, outcome, status,
    attempt, duration_ms, and the error text when there is one)."""
    metrics.record(outcome, seconds)
    if not log.isEnabledFor(logging.INFO):
        return
    log.info(
        "decided",
        extra={
            "source": source.value,
            "route": outcome.route,
            "message_id": message_id,
            "key": outcome.key or None,
            "outcome": outcome.kind.value,
            "status": outcome.http_status,
            "attempt": outcome.details.get("attempt"),
            "duration_ms": round(seconds * 1000, 1),
            "error": outcome.details.get("error"),  # why a delivery was refused or failed
        },
    )


def refuse(
    source: Source,
    error: ConsumerError,
    started: float,
    message_id: str | None = None,
    route: str = NO_ROUTE,
) -> Outcome:
    """The outcome of a delivery refused with ``error`` (``consumer.wire.outcomes.from_error``),
    recorded as its one decision. ``started``: the ``time.monotonic()`` at which the request
    began, so a refusal's duration is measured like any decision's."""
    outcome = from_error(error, route)
    record(source, outcome, message_id, time.monotonic() - started)
    return outcome
