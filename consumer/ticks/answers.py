"""The answers a tick gets that no other delivery does: deferred while another run of its task
goes on (overlap ``wait``, or a catch-up left over), and skipped while its task is paused."""

from __future__ import annotations

from datetime import datetime

from consumer.wire.events import Event
from consumer.wire.outcomes import Kind, Outcome

PAUSED = "paused"
WAIT_STATUS = 429
"""A deferred tick's answer: a nack (Pub/Sub and schedulers retry it with their backoff) that
is neither a 5xx nor a failure of ours, so no error rate or alert counts it."""


def waiting(other: str) -> str:
    return f"waiting for {other} to finish (overlap policy wait)"


def waiting_outcome(event: Event, other: str, **details: object) -> Outcome:
    """A tick deferred while ``other`` runs: nothing of it is recorded, and the answer is a
    retry later (``WAIT_STATUS``)."""
    body = {"status": "waiting", "waiting_for": other, "reason": waiting(other), **details}
    return Outcome(Kind.IN_PROGRESS, event.key, body, status=WAIT_STATUS, route=event.route.value)


def jitter_outcome(event: Event, start: datetime) -> Outcome:
    """A jittered slot's tick that came too early to wait for its start in the delivery:
    nothing is recorded, and the answer is a retry later (its redelivery runs it)."""
    at = start.isoformat()
    body = {"status": "waiting", "waiting_for": "jitter", "starts_at": at,
            "reason": f"the task's jitter starts this slot's run at {at}"}  # fmt: skip
    return Outcome(Kind.IN_PROGRESS, event.key, body, status=WAIT_STATUS, route=event.route.value)
