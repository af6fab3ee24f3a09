"""The outcome table (docs/architecture.md §3) in one place: what happened -> HTTP status ->
ack/nack.

Pub/Sub acks 102, 200, 201, 202 and 204 and redelivers on anything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from consumer.errors import BadRequest, ConsumerError, Forbidden, Unauthorized, Unavailable


class Kind(StrEnum):
    DONE = "done"
    DUPLICATE = "duplicate"
    IN_PROGRESS = "in-progress"
    RETRY = "retry"
    DEAD = "dead"
    UNROUTABLE = "unroutable"
    SKIPPED = "skipped"
    LEASE_LOST = "lease-lost"
    REJECTED = "rejected"
    UNAVAILABLE = "unavailable"
    ERROR = "error"
    """A bug of ours (the web framework's 500 for an unexpected exception): no detail leaks."""


STATUS = {
    Kind.DONE: 200,
    Kind.DUPLICATE: 200,
    Kind.IN_PROGRESS: 409,
    Kind.RETRY: 503,
    Kind.DEAD: 200,
    Kind.UNROUTABLE: 200,
    Kind.SKIPPED: 200,
    # Another delivery owns the row now. A nack unless that owner is known to come back if it
    # dies (``lease_lost``): a copy of the same message, once acked, is never delivered again.
    Kind.LEASE_LOST: 409,
    Kind.UNAVAILABLE: 503,
    Kind.ERROR: 500,
}
ACK_STATUSES = frozenset({102, 200, 201, 202, 204})
"""The statuses Pub/Sub counts as an ack; anything else is redelivered."""
NO_ROUTE = "-"
"""The route of a decision taken before an event was known (bad input, auth, outages)."""


@dataclass(frozen=True)
class Outcome:
    kind: Kind
    key: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    status: int = 0
    route: str = NO_ROUTE
    """The event's route (``tick``, ``storage``...), taken from the event itself."""

    @property
    def http_status(self) -> int:
        return self.status or STATUS[self.kind]

    @property
    def acked(self) -> bool:
        return self.http_status in ACK_STATUSES

    def body(self) -> dict[str, Any]:
        return {"outcome": self.kind.value, "key": self.key, **self.details}


def in_progress(key: str, route: str, running_redelivers: bool) -> Outcome:
    """The key is running under another claim. A nack (409) keeps a message alive; only the
    running delivery's own message needs that, and it is unacknowledged, so it comes back if its
    pod dies. Any *other* message with the same meaning can be acknowledged (200): nacks make
    Pub/Sub slow the whole subscription down. ``running_redelivers`` is false when the running
    delivery's source never redelivers (a deploy hook, the CLI): then every copy is nacked."""
    status = 200 if running_redelivers else STATUS[Kind.IN_PROGRESS]
    return Outcome(Kind.IN_PROGRESS, key, {"status": "running"}, status=status, route=route)


def lease_lost(key: str, route: str, details: dict[str, Any], left_to_another: bool) -> Outcome:
    """A delivery whose claim another delivery took over before it could record its verdict.
    Acknowledged (200) only when ``left_to_another``: the row is finished, or held by a
    *different* message whose delivery Pub/Sub redelivers if it dies. When the new owner is a
    copy of this same message (a balancer's retry, a push after the ack deadline), acking this
    one acks that message: if the copy then dies or its answer is dropped, nothing delivers the
    key again. So the answer is a nack (409), and the redelivery decides (a duplicate once the
    row is finished)."""
    status = 200 if left_to_another else STATUS[Kind.LEASE_LOST]
    return Outcome(Kind.LEASE_LOST, key, details, status=status, route=route)


def from_error(error: ConsumerError, route: str = NO_ROUTE) -> Outcome:
    """Refusals that happen before an event has a key: bad input (400, 408, 413), auth (401,
    403), outages and a server busy with another large body (503). ``route``: the event's, when
    it was known before the refusal (the database went away while it ran)."""
    details = {"error": error.message}
    if isinstance(error, Unavailable):
        return Outcome(Kind.UNAVAILABLE, details=details, route=route)
    if isinstance(error, BadRequest | Unauthorized | Forbidden):
        return Outcome(Kind.REJECTED, details=details, status=error.status, route=route)
    raise TypeError(f"no outcome for {type(error).__name__}")


def from_http_status(status: int, reason: str) -> Outcome:
    """What the web framework refused before a view ran (404, 405, 413...) or the 500 it makes
    of an unexpected exception: ``rejected`` with that status, or ``error`` for a 5xx."""
    kind = Kind.ERROR if status >= 500 else Kind.REJECTED
    return Outcome(kind, details={"error": reason}, status=status)
