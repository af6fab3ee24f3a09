"""The decision pipeline: classify -> claim in the inbox -> run the handler -> record the outcome
-> log one decision line and count it.

Every source of deliveries (push, deploy hook, pull, replay, a manual sweep) reads and parses
its input, then hands the message (``Dispatcher.dispatch``), the event (``handle``) or the reason
it could not (``refuse``) to the dispatcher; sources only adapt their input and output. This is
where at-least-once delivery becomes an exactly-once effect. At each step of a delivery the
event's route policy (``consumer.pipeline.policy``) may decide instead: the tick tasks' rules
live in ``consumer.ticks``, not here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

from consumer.db.engine import retry_on_stale
from consumer.errors import ConsumerError, Unavailable
from consumer.inbox.store import Inbox
from consumer.pipeline import admission, decision_log, one_commit
from consumer.pipeline.decision_log import Source
from consumer.pipeline.deliveries import Deliveries
from consumer.pipeline.policy import Renew
from consumer.pipeline.recording import Delivery, not_claimed, overran, taken_over
from consumer.pipeline.registry import Handler
from consumer.pipeline.running import Verdict, context_for, invoke
from consumer.wire.classify import classify
from consumer.wire.events import Event
from consumer.wire.message import PushMessage
from consumer.wire.outcomes import Kind, Outcome

Received = PushMessage | Event
Run = Callable[[Event, float], Outcome]
"""What decides a classified event, given when its delivery started."""


class Dispatcher(Deliveries):
    """Decides deliveries: one per call of ``dispatch`` (a message), ``handle`` (an event) or
    ``refuse`` (a delivery its source could not read), from any thread. Sources read and parse
    their input themselves; nothing here calls back into them."""

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
        recorded like any other (``decision_log.refuse``)."""
        return decision_log.refuse(source, error, _now_or(started))

    def run_unclaimed(self, event: Event, source: Source, budget: float | None) -> Outcome:
        """Run the event's handler without taking its inbox slot (a manual sweep runs beside a
        tick's sweep; the job claims keep them apart), otherwise decided like any delivery."""
        run = lambda event, _started: self._unclaimed(event, budget)  # noqa: E731
        return self._decide(source, event, time.monotonic(), run)

    def classify(self, message: PushMessage) -> Event:
        """The event ``message`` is, under this process's schedules and limits; ``InvalidEvent``
        (a 400: nothing is stored) when the message is ours but incomplete."""
        nodes = self.settings.inbox.max_json_nodes
        return classify(message, self.registry.schedule_of, nodes)

    def _decide(self, source: Source, received: Received, started: float, run: Run) -> Outcome:
        message_id = _message_of(received).message_id
        try:
            event = self.classify(received) if isinstance(received, PushMessage) else received
        except ConsumerError as error:
            return decision_log.refuse(source, error, started, message_id)
        refused = admission.refusal(self.settings, source, event)  # before anything is claimed
        try:
            outcome = self._refused(event, refused) if refused else run(event, started)
        except ConsumerError as error:
            return decision_log.refuse(source, error, started, message_id, event.route.value)
        decision_log.record(source, outcome, message_id, time.monotonic() - started)
        return outcome

    def _refused(self, event: Event, refused: admission.Refusal) -> Outcome:
        """A delivery its source may not start: recorded under its own key, nothing run."""
        with self.connection() as connection:
            inbox = self.inbox.on(connection)
            return admission.record(inbox, event, refused, self.clock(), self.lease)

    def _handle(self, event: Event, started: float) -> Outcome:
        # One connection serves the claim and the finish. Everything that reads before the claim
        # may fail with nothing written; after the claim, every path finishes the row.
        policy = self.policy(event)
        if early := policy.early(event):
            return early
        if self.registry.one_commit(event):
            return one_commit.decide(self, event, started)
        with self.connection() as connection:
            inbox = self.inbox.on(connection)
            if waiting := policy.waiting(event, inbox):
                return waiting  # nothing written: retried later
            stale, claim = retry_on_stale(connection, lambda: self.claim(inbox, event))
            if claim is None:
                return not_claimed(event, inbox.holder(event.key))
            handler = self.registry.resolve(event)
            delivery = self.delivery(claim, inbox, event, started)
            terminal = self.terminal(claim, event, handler, stale)
            terminal = terminal or policy.hold(event, claim, inbox)
            if handler is None or terminal is not None:
                assert terminal is not None  # no handler is a terminal verdict
                return policy.answer(event, terminal, self.finish(delivery, terminal))
            try:
                return policy.run(event, _Runs(self, delivery, handler))
            finally:
                with suppress(Unavailable):  # a run that cannot let go does when its lease ends
                    policy.release(event, inbox)

    def _run(
        self, delivery: Delivery, event: Event, handler: Handler, budget: float | None = None
    ) -> Outcome:
        claim, policy = delivery.claim, self.policy(event)
        renew = policy.renewing(event, delivery.inbox, self._renewer(delivery))
        context = context_for(
            self.settings, self.engine, claim.key, claim.attempts, budget, renew, self.clock
        )
        with self.heartbeats.kept(renew, until=delivery.ends):
            verdict = invoke(handler, context, event, self.settings.inbox.max_attempts)
        if verdict.kind is Kind.LEASE_LOST:
            late = time.monotonic() >= delivery.ends
            verdict = overran(verdict) if late else taken_over(verdict)
        outcome = self.finish(delivery, verdict)
        policy.after_run(event, outcome, delivery.inbox, delivery.record_by)
        return outcome

    def _run_other(self, trigger: Delivery, event: Event, handler: Handler, budget: float) -> str:
        """A run a policy owes under another key, on the trigger's connection; what became of it
        (``taken``: a delivery elsewhere holds or finished it)."""
        inbox = trigger.inbox
        claim = inbox.claim(event.key, event.route, event.message, self.clock(), self.lease)
        if claim is None:
            return "taken"
        delivery = self.delivery(claim, inbox, event, trigger.started)
        terminal = self.terminal(claim, event, handler, "")
        if terminal:
            return self.finish(delivery, terminal).kind.value
        return self._run(delivery, event, handler, budget).kind.value

    def _unclaimed(self, event: Event, budget: float | None) -> Outcome:
        route, handler = event.route.value, self.registry.resolve(event)
        if handler is None:
            details = {"error": self.policy(event).unroutable(event)}
            return Outcome(Kind.UNROUTABLE, event.key, details, route=route)
        context = context_for(self.settings, self.engine, event.key, 1, budget, clock=self.clock)
        verdict = invoke(handler, context, event, self.settings.inbox.max_attempts)
        body = {**verdict.details, "attempt": 1}
        if verdict.error:
            body["error"] = verdict.error
        return Outcome(verdict.kind, event.key, body, route=route)

    def _renewer(self, delivery: Delivery) -> Renew:
        """The renewal of the claim's short lease, every second while the handler runs
        (``consumer.pipeline.heartbeat``), and whenever a long handler calls ``heartbeat``; none
        past the delivery's deadline (``False``, as for a lost lease): Pub/Sub has redelivered
        by then, and the redelivery takes the row over once the lease lapses."""

        def renew() -> bool:
            if time.monotonic() >= delivery.ends:
                return False
            now = self.clock()
            return self.inbox.heartbeat(delivery.claim, now + self.lease, now)

        return renew


@dataclass(frozen=True)
class _Runs:
    """What a route policy's ``run`` may do with one claimed delivery (``policy.Runs``)."""

    dispatcher: Dispatcher
    delivery: Delivery
    handler: Handler

    @property
    def inbox(self) -> Inbox:
        return self.delivery.inbox

    @property
    def started(self) -> float:
        return self.delivery.started

    def run(self, event: Event, budget: float | None = None) -> Outcome:
        return self.dispatcher._run(self.delivery, event, self.handler, budget)

    def run_other(self, event: Event, budget: float) -> str:
        return self.dispatcher._run_other(self.delivery, event, self.handler, budget)

    def finish(self, verdict: Verdict) -> Outcome:
        return self.dispatcher.finish(self.delivery, verdict)


def _now_or(started: float | None) -> float:
    return time.monotonic() if started is None else started


def _message_of(received: Received) -> PushMessage:
    return received if isinstance(received, PushMessage) else received.message
