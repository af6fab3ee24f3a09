"""Running one handler: what it is given (its context and budget), and what its result or its
exception means (a ``Verdict``, one row of the outcome table, not yet recorded)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from sqlalchemy import Connection

from consumer.config.settings import Settings
from consumer.errors import Incomplete, LeaseLost, Permanent, Skip
from consumer.observe import spans
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.results import describe, json_safe_result
from consumer.wire.outcomes import Kind
from consumer.wire.timeutil import Clock, utcnow

log = logging.getLogger("consumer.running")


class Verdict(NamedTuple):
    """What a handler run came to, before it is recorded."""

    kind: Kind
    details: dict[str, Any]
    error: str | None = None
    refund_attempt: bool = False


def context_for(
    settings: Settings,
    engine: Any,
    key: str,
    attempt: int,
    budget: float | None = None,
    renew: Callable[[], bool] = lambda: True,
    clock: Clock = utcnow,
    connection: Connection | None = None,
) -> HandlerContext:
    """The one place a handler context is built; ``budget`` defaults to the handler budget;
    ``connection``: a one-commit delivery's transaction."""
    seconds = settings.handler_budget_seconds if budget is None else budget
    return HandlerContext(
        settings=settings,
        engine=engine,
        key=key,
        attempt=attempt,
        deadline=time.monotonic() + seconds,
        renew_lease=renew,
        clock=clock,
        connection=connection,
    )


def invoke(
    handler: Callable[..., Any], context: HandlerContext, event: Any, max_attempts: int
) -> Verdict:
    """Run the handler under its ``process`` span; what it raised decides the verdict. Every
    verdict's details leave here storable (``json_safe_result``): what a handler returned or
    raised can never make the finish fail, and so never has the effect done again."""
    with spans.handler_run(context.key, event) as span:
        verdict = _verdict(handler, context, event, max_attempts)
        spans.outcome(span, verdict.kind.value, verdict.error)
    return verdict._replace(details=json_safe_result(verdict.details))


def _verdict(
    handler: Callable[..., Any], context: HandlerContext, event: Any, max_attempts: int
) -> Verdict:
    try:
        result = handler(context, event)
    except Skip as skip:
        return Verdict(Kind.SKIPPED, {"reason": str(skip)})
    except LeaseLost as exc:
        return Verdict(Kind.LEASE_LOST, {"error": str(exc)})
    except Permanent as exc:
        return Verdict(Kind.DEAD, {}, describe(exc))
    except Incomplete as exc:
        return Verdict(Kind.RETRY, {}, describe(exc), refund_attempt=True)
    except Exception as exc:  # any other failure is retryable until attempts run out
        log.warning("handler failed for %s", context.key, exc_info=True)
        exhausted = context.attempt >= max_attempts
        return Verdict(Kind.DEAD if exhausted else Kind.RETRY, {}, describe(exc))
    # The effect has happened: whatever the result looks like, the event is done.
    return Verdict(Kind.DONE, result if isinstance(result, dict) else json_safe_result(result))
