"""What every path of a delivery shares (``consumer.pipeline.dispatch`` and its one-commit path,
``consumer.pipeline.one_commit``): its connection, its claim, the verdicts reached before any
handler runs, its route's policy (``consumer.pipeline.policy``) and the record of its outcome."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from sqlalchemy import Connection, Engine

from consumer.config.settings import Settings
from consumer.db.engine import unavailable_on_db_fault
from consumer.db.pinned import PinnedConnections
from consumer.inbox.store import Claim, Inbox
from consumer.pipeline import recording
from consumer.pipeline.heartbeat import Heartbeats
from consumer.pipeline.policy import policies
from consumer.pipeline.recording import RECORD_SLACK_SECONDS, Delivery
from consumer.pipeline.registry import Handler, Registry
from consumer.pipeline.running import Verdict
from consumer.wire.events import Event
from consumer.wire.outcomes import Kind, Outcome
from consumer.wire.timeutil import Clock, utcnow


class Deliveries:
    """The parts of the pipeline every delivery path uses, from any thread."""

    rerun = False
    """Whether this pipeline reruns stored messages (``consumer.pipeline.rerun``): its route
    policies are built for a rerun (a tick runs the slot it is given, however old)."""

    def __init__(
        self, settings: Settings, engine: Engine, registry: Registry, clock: Clock = utcnow
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.registry = registry
        self.inbox = Inbox(engine)
        self.clock = clock
        self.heartbeats = Heartbeats()
        self.policy = policies(registry.route_policies, settings, clock, self.rerun)
        """The route policy of an event."""
        postgres = engine.dialect.name == "postgresql"
        self._pinned = PinnedConnections.of(engine) if postgres else None

    @contextmanager
    def connection(self, autocommit: bool = True) -> Iterator[Connection]:
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

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.settings.lease_seconds)

    def claim(self, inbox: Inbox, event: Event) -> tuple[str, Claim | None]:
        """Nothing has run yet, so a try that met a dead connection may simply be made again."""
        stale = self.policy(event).stale(event, inbox)
        return stale, inbox.claim(event.key, event.route, event.message, self.clock(), self.lease)

    def terminal(
        self, claim: Claim, event: Event, handler: Handler | None, stale: str
    ) -> Verdict | None:
        """The outcomes decided before any handler runs (``handler``: the event's, resolved
        once per delivery)."""
        if claim.attempts > self.settings.inbox.max_attempts:
            return Verdict(Kind.DEAD, {}, "attempts exhausted (did a worker die?)")
        if handler is None:
            return Verdict(Kind.UNROUTABLE, {}, self.policy(event).unroutable(event))
        if stale:
            return Verdict(Kind.SKIPPED, {"reason": stale})
        return None

    def delivery(self, claim: Claim, inbox: Inbox, event: Event, started: float) -> Delivery:
        """A claimed delivery of ``event``, which began at ``started``."""
        message_id = event.message.message_id
        return Delivery(
            claim, inbox, event.route.value, started, self.record_by(started), message_id
        )

    def record_by(self, started: float) -> float:
        """Recording may retry until the request's own deadline (gunicorn's timeout is the ack
        deadline: a killed worker records nothing), even once the short lease has run out in an
        outage: the write is guarded by the claim's token, so it records the outcome if no
        redelivery took the claim over, and nothing if one did."""
        return started + self.settings.inbox.ack_deadline_seconds - RECORD_SLACK_SECONDS

    def finish(self, delivery: Delivery, verdict: Verdict) -> Outcome:
        return recording.finish(delivery, verdict, self.clock)
