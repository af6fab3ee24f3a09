"""The decision line: every delivery, whatever its source, is logged once with one fixed schema
and counted once in the metrics."""

from __future__ import annotations

import logging
from enum import StrEnum

from consumer.observe import metrics
from consumer.wire.outcomes import Outcome

log = logging.getLogger("consumer.decisions")


class Source(StrEnum):
    """Where a delivery came from; only the adapters differ, the decision is the same."""

    PUSH = "push"
    HOOK = "hook"
    PULL = "pull"
    REPLAY = "replay"
    CLI = "cli"
    """A manual run from the command line (``consumer sweep --once``)."""


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
