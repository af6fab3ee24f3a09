"""The core pipeline: classify -> claim in the inbox -> run the handler -> record the outcome.

This is where at-least-once delivery becomes an exactly-once effect; HTTP is only a caller.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from consumer import text
from consumer.classify import classify
from consumer.context import HandlerContext, LeaseLost
from consumer.db.engine import is_unavailable, sqlstate
from consumer.errors import Incomplete, Permanent, Unavailable
from consumer.events import Event, TickEvent
from consumer.inbox import Claim, Inbox, Status
from consumer.message import PushMessage
from consumer.outcomes import Kind, Outcome
from consumer.registry import Registry
from consumer.settings import Settings
from consumer.timeutil import Clock, utcnow

log = logging.getLogger("consumer.dispatch")
FINISH_RETRIES = 3
STATUS_OF = {
    Kind.DONE: Status.DONE,
    Kind.RETRY: Status.FAILED,
    Kind.DEAD: Status.DEAD,
    Kind.SKIPPED: Status.SKIPPED,
    Kind.UNROUTABLE: Status.UNROUTABLE,
}


class Skip(Exception):
    """Raised by a handler to record the event as ``skipped`` (acknowledged, not an error)."""


class Dispatcher:
    """Runs one message through the inbox and its handler and returns the outcome."""

    def __init__(
        self, settings: Settings, engine: Engine, registry: Registry, clock: Clock = utcnow
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.registry = registry
        self.inbox = Inbox(engine)
        self.clock = clock

    def dispatch(self, message: PushMessage) -> Outcome:
        """Classify and handle; ``InvalidEvent`` propagates (a 400: nothing is stored)."""
        return self.handle(classify(message, self.registry.period_of))

    def handle(self, event: Event) -> Outcome:
        # Everything that reads before the claim may fail with nothing written; after the claim,
        # every path finishes the row, so no failure strands it in ``running``.
        stale = self._stale_reason(event)
        lease = timedelta(seconds=self.settings.lease_seconds)
        claim = self.inbox.claim(event.key, event.route, event.message, self.clock(), lease)
        if claim is None:
            return self._not_claimed(event.key)
        handler = self.registry.resolve(event)
        if claim.attempts > self.settings.max_attempts:
            return self._finish(claim, Kind.DEAD, error="attempts exhausted (did a worker die?)")
        if handler is None:
            return self._finish(claim, Kind.UNROUTABLE, error=f"no handler for {event.route}")
        if stale:
            return self._finish(claim, Kind.SKIPPED, details={"reason": stale})
        return self._run(claim, event, handler)

    def _run(self, claim: Claim, event: Event, handler: Callable[..., Any]) -> Outcome:
        context = self._context(claim)
        try:
            result = handler(context, event)
        except Skip as skip:
            return self._finish(claim, Kind.SKIPPED, details={"reason": str(skip)})
        except LeaseLost as exc:
            return Outcome(Kind.LEASE_LOST, claim.key, {"error": str(exc)})
        except Permanent as exc:
            return self._finish(claim, Kind.DEAD, error=_describe(exc))
        except Incomplete as exc:
            return self._finish(claim, Kind.RETRY, error=_describe(exc), refund_attempt=True)
        except Exception as exc:  # any other failure is retryable until attempts run out
            log.warning("handler failed for %s", claim.key, exc_info=True)
            kind = Kind.DEAD if claim.attempts >= self.settings.max_attempts else Kind.RETRY
            return self._finish(claim, kind, error=_describe(exc))
        # The effect has happened: whatever the result looks like, the event is done.
        outcome = self._finish(claim, Kind.DONE, details=json_safe_result(result))
        if isinstance(event, TickEvent) and outcome.kind is Kind.DONE and not event.continuation:
            self._advance_slot(event)
        return outcome

    def _advance_slot(self, event: TickEvent) -> None:
        """Best effort: the tick is done either way; a missed advance only delays coalescing."""
        try:
            self.inbox.advance_slot(event.task, event.slot)
        except Unavailable:
            log.warning("could not record the completed slot of %s", event.key)

    def _context(self, claim: Claim) -> HandlerContext:
        deadline = time.monotonic() + self.settings.handler_budget_seconds

        def renew() -> bool:
            now = self.clock()
            return self.inbox.heartbeat(
                claim, now + timedelta(seconds=self.settings.lease_seconds), now
            )

        return HandlerContext(
            settings=self.settings,
            engine=self.engine,
            key=claim.key,
            attempt=claim.attempts,
            deadline=deadline,
            renew_lease=renew,
        )

    def _finish(
        self,
        claim: Claim,
        kind: Kind,
        details: Mapping[str, Any] | None = None,
        error: str | None = None,
        refund_attempt: bool = False,
    ) -> Outcome:
        """Record the outcome, retrying a short database blip so a done effect is not re-run."""
        status = STATUS_OF[kind]
        result = dict(details or {})
        for attempt in range(FINISH_RETRIES):
            try:
                kept = self.inbox.finish(
                    claim, status, self.clock(), result or None, error, refund_attempt
                )
                break
            except Unavailable:
                if attempt == FINISH_RETRIES - 1:
                    raise
                time.sleep(0.2 * 2**attempt)
        if not kept and not self.inbox.finished_as(claim, status):
            # (``finished_as``: a write that committed but whose reply was lost still counts.)
            return Outcome(Kind.LEASE_LOST, claim.key, {"attempt": claim.attempts})
        body = {**result, "attempt": claim.attempts}
        if error:
            body["error"] = error
        return Outcome(kind, claim.key, body)

    def _not_claimed(self, key: str) -> Outcome:
        row = self.inbox.get(key)
        if row is None or row.status in (Status.RUNNING, Status.FAILED):
            # Running elsewhere with a live lease (or just rearmed): the running copy decides.
            return Outcome(Kind.IN_PROGRESS, key, {"status": row.status if row else "unknown"})
        return Outcome(Kind.DUPLICATE, key, {"status": row.status.value})

    def _stale_reason(self, event: Event) -> str:
        """Ticks from a backlog are coalesced: only the current slots run."""
        if not isinstance(event, TickEvent) or event.continuation:
            return ""  # a continuation carries on a run that was current
        now, period = self.clock(), timedelta(seconds=event.period_seconds)
        max_age = period * self.settings.tick_max_age_periods
        if now - event.slot > max_age:
            return f"tick slot {event.slot.isoformat()} is older than {max_age}"
        if event.slot > now + period:
            # Pub/Sub stamps publishTime itself; a slot ahead of our clock by more than a period
            # is forged or badly skewed and must not advance the task's completed slot.
            return f"tick slot {event.slot.isoformat()} is in the future"
        last = self.inbox.last_slot(event.task)
        if last is not None and event.slot < last:
            return f"tick slot {event.slot.isoformat()} precedes completed slot {last.isoformat()}"
        return ""


def _describe(exc: BaseException) -> str:
    """A storable summary; database errors name their kind only (their text carries SQL and
    parameters, which belong in the log, not in responses)."""
    if isinstance(exc, DBAPIError):
        kind = "database unavailable" if is_unavailable(exc) else "database error"
        code = sqlstate(exc)
        return f"{kind}: {type(exc.orig).__name__}" + (f" (SQLSTATE {code})" if code else "")
    return text.describe(exc)


def json_safe_result(result: Any) -> dict[str, Any]:
    """A handler's result as a JSON object any database can store (and any client can read)."""
    if result is None:
        return {}
    if not isinstance(result, Mapping):
        return {"result": _storable_json(result)}
    return {str(key): _storable_json(value) for key, value in result.items()}


def _storable_json(value: Any) -> Any:
    if isinstance(value, str):
        return text.storable(value, limit=100_000)
    if isinstance(value, Mapping):
        return {text.storable(str(k)): _storable_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_storable_json(item) for item in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return text.storable(str(value))
