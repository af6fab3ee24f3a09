"""The one-commit path: claim, handler and outcome in one transaction, for a handler whose every
effect goes through ``context.connection`` (``local_effects``, docs/plugins.md): exactly once by
atomicity. A concurrent copy's claim waits on this transaction (PostgreSQL: the insert of the same
key; SQLite: the single writer) and then finds the row finished; a fault or a crash rolls
everything back, and the redelivery runs it again. A delivery that does not end ``done`` is rolled
back, the handler's effects with the claim, and its verdict recorded after (``_record_apart``).
The lease needs no heartbeat: no other delivery can take a row this transaction holds."""

from __future__ import annotations

import logging

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from consumer.db.engine import is_unavailable, retry_on_stale
from consumer.errors import Unavailable
from consumer.inbox.store import Claim, Inbox
from consumer.pipeline.deliveries import Deliveries
from consumer.pipeline.recording import STATUS_OF, not_claimed, outcome_of, taken_over
from consumer.pipeline.results import describe
from consumer.pipeline.running import Verdict, context_for, invoke
from consumer.wire.events import Event
from consumer.wire.outcomes import Kind, Outcome

log = logging.getLogger("consumer.dispatch")


def decide(pipeline: Deliveries, event: Event, started: float) -> Outcome:
    """Claim, run and record ``event`` in one transaction; a failure recorded after it."""
    with pipeline.connection(autocommit=False) as connection:
        inbox = pipeline.inbox.on(connection)
        claim = retry_on_stale(connection, lambda: _begin_claim(pipeline, inbox, event))
        if claim is None:
            outcome = not_claimed(event, inbox.holder(event.key, connection=connection))
            connection.commit()
            return outcome
        verdict = _verdict_in(pipeline, connection, claim, event)
        if verdict.kind is Kind.DONE:
            try:
                outcome = _finish_in(pipeline, connection, claim, event.route.value, verdict)
                connection.commit()
                return outcome
            except DBAPIError as exc:
                if is_unavailable(exc):
                    raise  # a fault: answered 503 and redelivered, whether or not it committed
                verdict = _uncommitted(pipeline, claim, exc)
        connection.rollback()
    if verdict.kind is Kind.LEASE_LOST:  # not this row's: the transaction holds it
        verdict = taken_over(verdict)
    # Nothing was committed, so no progress to refund: the attempt counts.
    return _record_apart(pipeline, event, verdict._replace(refund_attempt=False), started)


def _uncommitted(pipeline: Deliveries, claim: Claim, exc: DBAPIError) -> Verdict:
    """A run that returned but whose transaction cannot commit (say, its handler caught a
    database error and went on in the aborted transaction): a failed attempt, not a 500."""
    log.warning("the transaction of %s could not commit", claim.key, exc_info=True)
    exhausted = claim.attempts >= pipeline.settings.inbox.max_attempts
    error = f"the handler's transaction could not commit: {describe(exc)}"
    return Verdict(Kind.DEAD if exhausted else Kind.RETRY, {}, error)


def _begin_claim(pipeline: Deliveries, inbox: Inbox, event: Event) -> Claim | None:
    """Begin the block and claim in it; a dead connection's block is ended, so that the
    claim may be tried again on the reconnected one (``retry_on_stale``)."""
    connection = inbox.connection
    assert connection is not None  # bound to the delivery's connection
    connection.begin()
    try:
        return inbox.claim(event.key, event.route, event.message, pipeline.clock(),
                           pipeline.lease, connection=connection)  # fmt: skip
    except Unavailable:
        connection.rollback()
        raise


def _verdict_in(
    pipeline: Deliveries, connection: Connection, claim: Claim, event: Event
) -> Verdict:
    """A verdict reached before the handler (attempts exhausted, no handler), else the
    handler's, run with the delivery's transaction as its ``context.connection``."""
    handler = pipeline.registry.resolve(event)
    if terminal := pipeline.terminal(claim, event, handler, ""):
        return terminal
    assert handler is not None  # no handler is a terminal verdict
    settings = pipeline.settings
    context = context_for(settings, pipeline.engine, claim.key, claim.attempts,
                          clock=pipeline.clock, connection=connection)  # fmt: skip
    return invoke(handler, context, event, settings.inbox.max_attempts)


def _finish_in(
    pipeline: Deliveries, connection: Connection, claim: Claim, route: str, verdict: Verdict
) -> Outcome:
    """The outcome written in the delivery's own transaction, which holds the row: no other
    delivery can have taken it over, and it commits with the effects."""
    status, result = STATUS_OF[verdict.kind], verdict.details or None
    pipeline.inbox.finish(claim, status, pipeline.clock(), result, verdict.error,
                          connection=connection)  # fmt: skip
    return outcome_of(claim, route, verdict)


def _record_apart(pipeline: Deliveries, event: Event, verdict: Verdict, started: float) -> Outcome:
    """A one-commit run that failed, recorded after its rollback as the two-commit path
    records one: claimed again, then finished with its verdict (the rollback cost the happy
    path nothing: no savepoint). A copy that claimed the key in between decides instead."""
    with pipeline.connection() as connection:
        inbox = pipeline.inbox.on(connection)
        _, claim = retry_on_stale(connection, lambda: pipeline.claim(inbox, event))
        if claim is None:
            return not_claimed(event, inbox.holder(event.key))
        return pipeline.finish(pipeline.delivery(claim, inbox, event, started), verdict)
