"""Recording a delivery's verdict: the guarded write of its outcome, retried through an outage
while its deadline leaves room, and the answer to a delivery whose claim was lost or never made
(acknowledged only when nothing of its message is left to run: ``wire.outcomes.lease_lost``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from consumer.db import retry
from consumer.errors import Unavailable
from consumer.inbox.model import FINAL, Holder
from consumer.inbox.store import Claim, Inbox, Status
from consumer.pipeline.running import Verdict
from consumer.wire.events import Event
from consumer.wire.message import Format
from consumer.wire.outcomes import Kind, Outcome, in_progress, lease_lost
from consumer.wire.timeutil import Clock

RECORD_SLACK_SECONDS = 1.0
"""Recording stops retrying this long before the lease (or the request's deadline) runs out."""
NOT_REDELIVERED = frozenset({Format.DEPLOY_HOOK, Format.HTTP_TICK, Format.CLI})
"""Formats whose delivery nobody is known to redeliver if its process dies (no unacknowledged
message; a scheduler's HTTP call is retried only if its job says so)."""
STATUS_OF = {
    Kind.DONE: Status.DONE,
    Kind.RETRY: Status.FAILED,
    Kind.DEAD: Status.DEAD,
    Kind.SKIPPED: Status.SKIPPED,
    Kind.UNROUTABLE: Status.UNROUTABLE,
}


@dataclass
class Delivery:
    """One claimed delivery: its claim, its inbox connection, and until when it may record."""

    claim: Claim
    inbox: Inbox
    route: str
    """The event's route: every outcome of the delivery is built with it."""
    started: float
    """``time.monotonic()`` when the delivery was received."""
    record_by: float
    """``time.monotonic()`` by which recording must be done: the request's end."""
    message_id: str
    """The delivered message's id: whether a lost lease may be acknowledged depends on it."""

    @property
    def ends(self) -> float:
        """``time.monotonic()`` of the delivery's deadline (the ack deadline): its lease is not
        renewed past it, so a handler that never returns lets a redelivery take over."""
        return self.record_by + RECORD_SLACK_SECONDS


def finish(delivery: Delivery, verdict: Verdict, clock: Clock) -> Outcome:
    """Record the verdict, retrying through a database outage while the lease leaves room,
    so an effect already made is not run again by the redelivery."""
    claim, inbox, status = delivery.claim, delivery.inbox, STATUS_OF[verdict.kind]
    result = verdict.details

    def write() -> bool:
        kept = inbox.finish(claim, status, clock(), result or None, verdict.error,
                            verdict.refund_attempt)  # fmt: skip
        # A commit whose reply was lost looks like a lost lease to the retry.
        return kept or inbox.finished_as(claim, status)

    if not retry.until_deadline(write, delivery.record_by, f"the outcome of {claim.key}"):
        lost = {"attempt": claim.attempts}
        return _lost(inbox, claim, delivery.message_id, delivery.route, lost)
    return outcome_of(claim, delivery.route, verdict)


def _lost(
    inbox: Inbox, claim: Claim, message_id: str, route: str, details: dict[str, Any]
) -> Outcome:
    """A claim taken over before its verdict was recorded: acknowledged only if what holds
    the row now leaves nothing to this delivery's message (``wire.outcomes.lease_lost``)."""
    try:
        row = inbox.holder(claim.key)
    except Unavailable:
        row = None  # the owner is unknown: nacked, the redelivery decides
    left = row is not None and (row.status in FINAL or _redelivered_elsewhere(row, message_id))
    return lease_lost(claim.key, route, details, left)


def not_claimed(event: Event, row: Holder | None) -> Outcome:
    """``row``: what holds the key the delivery could not claim."""
    if row is None or row.status in (Status.RUNNING, Status.FAILED):
        # Running elsewhere with a live lease (or just rearmed): the running copy decides.
        # Only the running delivery's own message must be nacked to stay alive.
        acknowledge = _redelivered_elsewhere(row, event.message.message_id)
        return in_progress(event.key, event.route.value, acknowledge)
    details = {"status": row.status.value}
    return Outcome(Kind.DUPLICATE, event.key, details, route=event.route.value)


def outcome_of(claim: Claim, route: str, verdict: Verdict) -> Outcome:
    """The answer to a recorded verdict: the handler's result, the attempt, the error."""
    body = {**verdict.details, "attempt": claim.attempts}
    if verdict.error:
        body["error"] = verdict.error
    return Outcome(verdict.kind, claim.key, body, route=route)


def taken_over(verdict: Verdict) -> Verdict:
    """A handler that raised ``LeaseLost``, recorded as what it means if this delivery's claim
    still holds the row (the guarded write says; if not, the lease was lost, ``_lost``): the
    handler's own resource was taken over (a later run owns the file), which carries the work
    on. Skipped: answering ``lease-lost`` left the row ``running`` for ever."""
    return Verdict(Kind.SKIPPED, {"reason": f"taken over: {verdict.details.get('error', '')}"})


def overran(verdict: Verdict) -> Verdict:
    """A handler whose lease renewal was refused past its delivery's deadline: failed, so the
    redelivery takes the row over at once."""
    error = f"the delivery's deadline passed: {verdict.details.get('error', '')}"
    return Verdict(Kind.RETRY, {}, error)


def _redelivered_elsewhere(row: Holder | None, message_id: str) -> bool:
    """Whether ``row`` is running under a *different* message that comes back if its delivery
    dies (unacknowledged while it runs): then acknowledging ``message_id`` loses nothing. A copy
    of the same message is that message: acking this delivery acks the copy. A failed row's
    message may be acknowledged already (a replay rearms a dead row under its old message)."""
    return (
        row is not None
        and row.status is Status.RUNNING
        and row.message_id != message_id
        and row.format not in NOT_REDELIVERED
    )
