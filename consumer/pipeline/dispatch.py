"""The decision pipeline: classify -> claim in the inbox -> run the handler -> record the outcome
-> log one decision line and count it.

Every source of deliveries (push, deploy hook, pull, replay, a manual sweep) reads and parses
its input, then hands the message (``Dispatcher.dispatch``), the event (``handle``) or the reason
it could not (``refuse``) to the dispatcher; sources only adapt their input and output. This is
where at-least-once delivery becomes an exactly-once effect.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from consumer.config.settings import Settings
from consumer.db import retry
from consumer.db.engine import is_unavailable, retry_on_stale, unavailable_on_db_fault
from consumer.db.pinned import PinnedConnections
from consumer.errors import ConsumerError, Unavailable
from consumer.inbox.model import FINAL, Holder
from consumer.inbox.store import Claim, Inbox, Status
from consumer.pipeline import admission, decisions
from consumer.pipeline.decisions import Source
from consumer.pipeline.heartbeat import Heartbeats
from consumer.pipeline.registry import Handler, Registry
from consumer.pipeline.results import describe
from consumer.pipeline.running import Verdict, context_for, invoke
from consumer.pipeline.tick_rules import TickRules, waiting_outcome
from consumer.wire import schedule
from consumer.wire.classify import classify
from consumer.wire.events import Event, TickEvent
from consumer.wire.message import Format, PushMessage
from consumer.wire.outcomes import Kind, Outcome, in_progress, lease_lost
from consumer.wire.timeutil import Clock, utcnow

log = logging.getLogger("consumer.dispatch")
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
Received = PushMessage | Event
Run = Callable[[Event, float], Outcome]
"""What decides a classified event, given when its delivery started."""


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


class Dispatcher:
    """Decides deliveries: one per call of ``dispatch`` (a message), ``handle`` (an event) or
    ``refuse`` (a delivery its source could not read), from any thread. Sources read and parse
    their input themselves; nothing here calls back into them."""

    def __init__(
        self, settings: Settings, engine: Engine, registry: Registry, clock: Clock = utcnow
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.registry = registry
        self.inbox = Inbox(engine)
        self.clock = clock
        self._ticks = TickRules(settings, registry, clock)
        self.heartbeats = Heartbeats()
        postgres = engine.dialect.name == "postgresql"
        self._pinned = PinnedConnections.of(engine) if postgres else None

    def dispatch(
        self, message: PushMessage, source: Source = Source.PUSH, started: float | None = None
    ) -> Outcome:
        """Classify, claim, run and record ``message``; log and count the decision once.
        ``started``: the ``time.monotonic()`` at which its request began (default: now), so the
        decision's duration counts the reading and parsing its source did."""
        return self._decide(source, message, _now_or(started), self._handle)

    def handle(
        self, event: Event, source: Source = Source.PUSH, started: float | None = None
    ) -> Outcome:
        """``dispatch`` for an event its source has already classified (a deploy hook, replay)."""
        return self._decide(source, event, _now_or(started), self._handle)

    def refuse(self, source: Source, error: ConsumerError, started: float | None = None) -> Outcome:
        """A delivery its source refused before a message was known (unparsable): decided and
        recorded like any other (``decisions.refuse``)."""
        return decisions.refuse(source, error, _now_or(started))

    def run_unclaimed(self, event: Event, source: Source, budget: float | None) -> Outcome:
        """Run the event's handler without taking its inbox slot (a manual sweep runs beside a
        tick's sweep; the job claims keep them apart), otherwise decided like any delivery."""
        run = lambda event, _started: self._unclaimed(event, budget)  # noqa: E731
        return self._decide(source, event, time.monotonic(), run)

    def _decide(self, source: Source, received: Received, started: float, run: Run) -> Outcome:
        message_id = _message_of(received).message_id
        try:
            event = self._classify(received)
        except ConsumerError as error:
            return decisions.refuse(source, error, started, message_id)
        refused = admission.refusal(self.settings, source, event)  # before anything is claimed
        try:
            outcome = self._refused(event, refused) if refused else run(event, started)
        except ConsumerError as error:
            return decisions.refuse(source, error, started, message_id, event.route.value)
        decisions.record(source, outcome, message_id, time.monotonic() - started)
        return outcome

    def _refused(self, event: Event, refused: admission.Refusal) -> Outcome:
        """A delivery its source may not start: recorded under its own key, nothing run."""
        lease = timedelta(seconds=self.settings.lease_seconds)
        with self._connection() as connection:
            return admission.record(self.inbox.on(connection), event, refused, self.clock(), lease)

    def classify(self, message: PushMessage) -> Event:
        """The event ``message`` is, under this process's schedules and limits; ``InvalidEvent``
        (a 400: nothing is stored) when the message is ours but incomplete."""
        nodes = self.settings.inbox.max_json_nodes
        return classify(message, self.registry.schedule_of, nodes)

    def _classify(self, received: Received) -> Event:
        return self.classify(received) if isinstance(received, PushMessage) else received

    def _handle(self, event: Event, started: float) -> Outcome:
        # One connection serves the claim and the finish. Everything that reads before the claim
        # may fail with nothing written; after the claim, every path finishes the row.
        route = event.route.value
        if early := self._future_reason(event):
            details = {"reason": early, "recorded": False}
            return Outcome(Kind.SKIPPED, event.key, details, route=route)
        if self.registry.one_commit(event):
            return self._one_commit(event, started)
        with self._connection() as connection:
            inbox = self.inbox.on(connection)
            if busy := self._ticks.busy(event, inbox):  # overlap=wait only
                return waiting_outcome(event, busy)  # nothing written: retried later
            stale, claim = retry_on_stale(connection, lambda: self._claim(inbox, event))
            if claim is None:
                return self._not_claimed(event, inbox.holder(event.key))
            handler = self.registry.resolve(event)
            record_by = self._record_by(started)
            message_id = event.message.message_id
            delivery = Delivery(claim, inbox, route, started, record_by, message_id)
            terminal = self._terminal(claim, event, handler, stale)
            terminal = terminal or self._ticks.paused(event, inbox)
            if handler is not None and terminal is None:
                return self._held_run(delivery, event, handler)
            assert terminal is not None  # no handler is a terminal verdict
            return self._decline(delivery, event, terminal)

    def _held_run(self, delivery: Delivery, event: Event, handler: Handler) -> Outcome:
        """Run, holding the tick's task while it runs when its overlap policy says so."""
        if yielded := self._ticks.take(event, delivery.claim, delivery.inbox):
            return self._decline(delivery, event, yielded)
        try:
            return self._catch_up_then_run(delivery, event, handler)
        finally:
            with suppress(Unavailable):  # a run that cannot let go does when its lease ends
                self._ticks.release(event, delivery.inbox)

    def _one_commit(self, event: Event, started: float) -> Outcome:
        """Claim, handler and outcome in one transaction (a handler whose effects all go through
        ``context.connection``): exactly once by atomicity. A concurrent copy's claim waits on
        this transaction (PostgreSQL: the insert of the same key; SQLite: the single writer)
        and then finds the row finished; a fault or a crash rolls everything back, and the
        redelivery runs it again. A delivery that does not end ``done`` is rolled back, the
        handler's effects with the claim, and its verdict recorded after (``_record_apart``).
        The lease needs no heartbeat: no other delivery can take a row this transaction
        holds."""
        with self._connection(autocommit=False) as connection:
            inbox = self.inbox.on(connection)
            claim = retry_on_stale(connection, lambda: self._begin_claim(inbox, event))
            if claim is None:
                outcome = self._not_claimed(event, inbox.holder(event.key, connection=connection))
                connection.commit()
                return outcome
            verdict = self._verdict_in(connection, claim, event)
            if verdict.kind is Kind.DONE:
                try:
                    outcome = self._finish_in(connection, claim, event.route.value, verdict)
                    connection.commit()
                    return outcome
                except DBAPIError as exc:
                    if is_unavailable(exc):
                        raise  # a fault: answered 503 and redelivered, whether or not it committed
                    verdict = self._uncommitted(claim, exc)
            connection.rollback()
        if verdict.kind is Kind.LEASE_LOST:  # not this row's: the transaction holds it
            verdict = _taken_over(verdict)
        # Nothing was committed, so no progress to refund: the attempt counts.
        return self._record_apart(event, verdict._replace(refund_attempt=False), started)

    def _uncommitted(self, claim: Claim, exc: DBAPIError) -> Verdict:
        """A run that returned but whose transaction cannot commit (say, its handler caught a
        database error and went on in the aborted transaction): a failed attempt, not a 500."""
        log.warning("the transaction of %s could not commit", claim.key, exc_info=True)
        exhausted = claim.attempts >= self.settings.inbox.max_attempts
        error = f"the handler's transaction could not commit: {describe(exc)}"
        return Verdict(Kind.DEAD if exhausted else Kind.RETRY, {}, error)

    def _begin_claim(self, inbox: Inbox, event: Event) -> Claim | None:
        """Begin the block and claim in it; a dead connection's block is ended, so that the
        claim may be tried again on the reconnected one (``retry_on_stale``)."""
        connection, lease = inbox.connection, timedelta(seconds=self.settings.lease_seconds)
        assert connection is not None  # bound to the delivery's connection
        connection.begin()
        try:
            return inbox.claim(event.key, event.route, event.message, self.clock(), lease,
                               connection=connection)  # fmt: skip
        except Unavailable:
            connection.rollback()
            raise

    def _verdict_in(self, connection: Connection, claim: Claim, event: Event) -> Verdict:
        """A verdict reached before the handler (attempts exhausted, no handler), else the
        handler's, run with the delivery's transaction as its ``context.connection``."""
        handler = self.registry.resolve(event)
        if terminal := self._terminal(claim, event, handler, ""):
            return terminal
        assert handler is not None  # no handler is a terminal verdict
        context = context_for(self.settings, self.engine, claim.key, claim.attempts,
                              clock=self.clock, connection=connection)  # fmt: skip
        return invoke(handler, context, event, self.settings.inbox.max_attempts)

    def _finish_in(
        self, connection: Connection, claim: Claim, route: str, verdict: Verdict
    ) -> Outcome:
        """The outcome written in the delivery's own transaction, which holds the row: no other
        delivery can have taken it over, and it commits with the effects."""
        status, result = STATUS_OF[verdict.kind], verdict.details or None
        self.inbox.finish(claim, status, self.clock(), result, verdict.error, connection=connection)
        return _outcome(claim, route, verdict)

    def _record_apart(self, event: Event, verdict: Verdict, started: float) -> Outcome:
        """A one-commit run that failed, recorded after its rollback as the two-commit path
        records one: claimed again, then finished with its verdict (the rollback cost the happy
        path nothing: no savepoint). A copy that claimed the key in between decides instead."""
        with self._connection() as connection:
            inbox = self.inbox.on(connection)
            _, claim = retry_on_stale(connection, lambda: self._claim(inbox, event))
            if claim is None:
                return self._not_claimed(event, inbox.holder(event.key))
            record_by, message_id = self._record_by(started), event.message.message_id
            delivery = Delivery(claim, inbox, event.route.value, started, record_by, message_id)
            return self._finish(delivery, verdict)

    def _claim(self, inbox: Inbox, event: Event) -> tuple[str, Claim | None]:
        """Nothing has run yet, so a try that met a dead connection may simply be made again."""
        stale = self._stale_reason(inbox, event)
        lease = timedelta(seconds=self.settings.lease_seconds)
        return stale, inbox.claim(event.key, event.route, event.message, self.clock(), lease)

    @contextmanager
    def _connection(self, autocommit: bool = True) -> Iterator[Connection]:
        """Single-statement writes need no transaction block: on PostgreSQL each runs in
        autocommit (one round trip instead of BEGIN, the statement and COMMIT), on the thread's
        kept connection; a one-commit delivery (``autocommit`` false) begins its block on the
        same connection. SQLite's writers queue on one file lock: a connection per delivery."""
        with unavailable_on_db_fault():
            if self._pinned is not None:
                kept = self._pinned.connection() if autocommit else self._pinned.transaction()
                with kept as connection:
                    yield connection
            else:
                with self.engine.connect() as connection:
                    yield connection

    def _terminal(
        self, claim: Claim, event: Event, handler: Handler | None, stale: str
    ) -> Verdict | None:
        """The outcomes decided before any handler runs (``handler``: the event's, resolved
        once per delivery)."""
        if claim.attempts > self.settings.inbox.max_attempts:
            return Verdict(Kind.DEAD, {}, "attempts exhausted (did a worker die?)")
        if handler is None:
            return Verdict(Kind.UNROUTABLE, {}, self._unroutable(event))
        if stale:
            return Verdict(Kind.SKIPPED, {"reason": stale})
        return None

    def _unroutable(self, event: Event) -> str:
        if isinstance(event, TickEvent):
            names = ", ".join(sorted(self.registry.tasks)) or "none"
            return f"no tick task {event.task!r} is registered (registered: {names})"
        return f"no handler for {event.route}"

    def _decline(self, delivery: Delivery, event: Event, verdict: Verdict) -> Outcome:
        """Record a verdict reached before the handler; a tick that waits for another run gives
        its claim back (failed, attempt refunded) and is answered as one that never claimed."""
        outcome = self._finish(delivery, verdict)
        if outcome.kind is Kind.RETRY and "waiting_for" in verdict.details:
            return waiting_outcome(event, verdict.details["waiting_for"])
        return outcome

    def _catch_up_then_run(self, delivery: Delivery, event: Event, handler: Handler) -> Outcome:
        """The runs of missed slots the catch-up policy asks for, oldest first, each under its
        own key, in the first half of this delivery's budget; then the tick's own run. Slots
        left over defer the tick (its retry carries on from the last caught-up slot)."""
        missed = self._ticks.catch_ups(event, delivery.inbox)
        budget = self.settings.handler_budget_seconds
        ran: dict[str, str] = {}
        for run in missed:
            left = delivery.started + budget / 2 - time.monotonic()
            if left <= 0:
                break
            ran[run.slot.isoformat()] = self._catch_up(delivery, run, handler, left)
        if len(ran) < len(missed):
            waiting = Verdict(Kind.RETRY, {"waiting_for": "catch-up"}, "catching up", True)
            self._finish(delivery, waiting)
            return waiting_outcome(event, "catch-up", caught_up=ran, left=len(missed) - len(ran))
        rest = delivery.started + budget - time.monotonic() if missed else None
        outcome = self._run(delivery, event, handler, rest)
        return replace(outcome, details={**outcome.details, "caught_up": ran}) if ran else outcome

    def _catch_up(self, trigger: Delivery, run: TickEvent, handler: Handler, budget: float) -> str:
        """One missed slot's run on the trigger's connection; what became of it (``taken``: a
        delivery elsewhere holds or finished it)."""
        lease = timedelta(seconds=self.settings.lease_seconds)
        claim = trigger.inbox.claim(run.key, run.route, run.message, self.clock(), lease)
        if claim is None:
            return "taken"
        record_by, message_id = self._record_by(trigger.started), run.message.message_id
        delivery = Delivery(
            claim, trigger.inbox, trigger.route, trigger.started, record_by, message_id
        )
        terminal = self._terminal(claim, run, handler, "")
        outcome = (
            self._finish(delivery, terminal)
            if terminal
            else self._run(delivery, run, handler, budget)
        )
        log.info("caught up", extra={"key": run.key, "outcome": outcome.kind.value})
        return outcome.kind.value

    def _run(
        self, delivery: Delivery, event: Event, handler: Handler, budget: float | None = None
    ) -> Outcome:
        claim = delivery.claim
        renew = self._ticks.renewing(event, delivery.inbox, self._renewer(delivery))
        context = context_for(
            self.settings, self.engine, claim.key, claim.attempts, budget, renew, self.clock
        )
        with self.heartbeats.kept(renew, until=delivery.ends):
            verdict = invoke(handler, context, event, self.settings.inbox.max_attempts)
        if verdict.kind is Kind.LEASE_LOST:
            verdict = (
                _overran(verdict) if time.monotonic() >= delivery.ends else _taken_over(verdict)
            )
        outcome = self._finish(delivery, verdict)
        if isinstance(event, TickEvent) and outcome.kind is Kind.DONE and _advances(event):
            self._advance_slot(delivery, event)
        return outcome

    def _unclaimed(self, event: Event, budget: float | None) -> Outcome:
        route, handler = event.route.value, self.registry.resolve(event)
        if handler is None:
            details = {"error": self._unroutable(event)}
            return Outcome(Kind.UNROUTABLE, event.key, details, route=route)
        context = context_for(self.settings, self.engine, event.key, 1, budget, clock=self.clock)
        verdict = invoke(handler, context, event, self.settings.inbox.max_attempts)
        body = {**verdict.details, "attempt": 1}
        if verdict.error:
            body["error"] = verdict.error
        return Outcome(verdict.kind, event.key, body, route=route)

    def _renewer(self, delivery: Delivery) -> Callable[[], bool]:
        """The renewal of the claim's short lease, every second while the handler runs
        (``consumer.pipeline.heartbeat``), and whenever a long handler calls ``heartbeat``; none
        past the delivery's deadline (``False``, as for a lost lease): Pub/Sub has redelivered
        by then, and the redelivery takes the row over once the lease lapses."""

        def renew() -> bool:
            if time.monotonic() >= delivery.ends:
                return False
            now, lease = self.clock(), timedelta(seconds=self.settings.lease_seconds)
            return self.inbox.heartbeat(delivery.claim, now + lease, now)

        return renew

    def _record_by(self, started: float) -> float:
        """Recording may retry until the request's own deadline (gunicorn's timeout is the ack
        deadline: a killed worker records nothing), even once the short lease has run out in an
        outage: the write is guarded by the claim's token, so it records the outcome if no
        redelivery took the claim over, and nothing if one did."""
        return started + self.settings.inbox.ack_deadline_seconds - RECORD_SLACK_SECONDS

    def _finish(self, delivery: Delivery, verdict: Verdict) -> Outcome:
        """Record the verdict, retrying through a database outage while the lease leaves room,
        so an effect already made is not run again by the redelivery."""
        claim, inbox, status = delivery.claim, delivery.inbox, STATUS_OF[verdict.kind]
        result = verdict.details

        def write() -> bool:
            now = self.clock()
            kept = inbox.finish(claim, status, now, result or None, verdict.error,
                                verdict.refund_attempt)  # fmt: skip
            # A commit whose reply was lost looks like a lost lease to the retry.
            return kept or inbox.finished_as(claim, status)

        if not retry.until_deadline(write, delivery.record_by, f"the outcome of {claim.key}"):
            lost = {"attempt": claim.attempts}
            return self._lost(inbox, claim, delivery.message_id, delivery.route, lost)
        return _outcome(claim, delivery.route, verdict)

    def _lost(
        self, inbox: Inbox, claim: Claim, message_id: str, route: str, details: dict[str, Any]
    ) -> Outcome:
        """A claim taken over before its verdict was recorded: acknowledged only if what holds
        the row now leaves nothing to this delivery's message (``wire.outcomes.lease_lost``)."""
        try:
            row = inbox.holder(claim.key)
        except Unavailable:
            row = None  # the owner is unknown: nacked, the redelivery decides
        left = row is not None and (row.status in FINAL or _redelivered_elsewhere(row, message_id))
        return lease_lost(claim.key, route, details, left)

    def _advance_slot(self, delivery: Delivery, event: TickEvent) -> None:
        """Retried like the finish; the tick is done either way, a missed advance only delays
        coalescing."""
        advance = lambda: delivery.inbox.advance_slot(event.task, event.slot, str(event.schedule))  # noqa: E731
        try:
            retry.until_deadline(advance, delivery.record_by, f"the slot of {event.key}")
        except Unavailable:
            log.warning("could not record the completed slot of %s", event.key)

    def _not_claimed(self, event: Event, row: Holder | None) -> Outcome:
        """``row``: what holds the key the delivery could not claim."""
        if row is None or row.status in (Status.RUNNING, Status.FAILED):
            # Running elsewhere with a live lease (or just rearmed): the running copy decides.
            # Only the running delivery's own message must be nacked to stay alive.
            acknowledge = _redelivered_elsewhere(row, event.message.message_id)
            return in_progress(event.key, event.route.value, acknowledge)
        details = {"status": row.status.value}
        return Outcome(Kind.DUPLICATE, event.key, details, route=event.route.value)

    def _future_reason(self, event: Event) -> str:
        """A tick whose slot has not begun is forged or skewed: acknowledged but not claimed, so
        no row takes that slot's key (the genuine tick runs) and no completed slot advances."""
        if not isinstance(event, TickEvent):
            return ""
        tolerance = self.settings.ticks.future_tolerance_seconds
        return schedule.future_reason(event.slot, self.clock(), tolerance)

    coalesces = True
    """Whether ticks from a backlog are coalesced (``_stale_reason``); a rerun's dispatcher
    (``consumer.pipeline.rerun``: an operator's replay, the service's re-drive) runs the slot it
    is given, which was claimed while it was current and never ran to its end."""

    def _stale_reason(self, inbox: Inbox, event: Event) -> str:
        """Ticks from a backlog are coalesced: only the current slots run."""
        if not self.coalesces or not isinstance(event, TickEvent):
            return ""
        if event.continuation or event.run_now:
            return ""  # a continuation carries on a run that was current; a run now is now
        max_age = self.settings.ticks.max_age_periods
        if old := schedule.stale_reason(event.schedule, event.slot, self.clock(), max_age):
            return old
        last = inbox.last_slot(event.task)
        if last is not None and event.slot < last:
            return f"tick slot {event.slot.isoformat()} precedes completed slot {last.isoformat()}"
        return ""


def _outcome(claim: Claim, route: str, verdict: Verdict) -> Outcome:
    """The answer to a recorded verdict: the handler's result, the attempt, the error."""
    body = {**verdict.details, "attempt": claim.attempts}
    if verdict.error:
        body["error"] = verdict.error
    return Outcome(verdict.kind, claim.key, body, route=route)


def _taken_over(verdict: Verdict) -> Verdict:
    """A handler that raised ``LeaseLost``, recorded as what it means if this delivery's claim
    still holds the row (the guarded write says; if not, the lease was lost, ``_lost``): the
    handler's own resource was taken over (a later run owns the file), which carries the work
    on. Skipped: answering ``lease-lost`` left the row ``running`` for ever."""
    return Verdict(Kind.SKIPPED, {"reason": f"taken over: {verdict.details.get('error', '')}"})


def _overran(verdict: Verdict) -> Verdict:
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


def _advances(event: TickEvent) -> bool:
    """A slot's run and a catch-up run complete their slot; a continuation or a run now none."""
    return not (event.continuation or event.run_now)


def _now_or(started: float | None) -> float:
    return time.monotonic() if started is None else started


def _message_of(received: Received) -> PushMessage:
    return received if isinstance(received, PushMessage) else received.message
