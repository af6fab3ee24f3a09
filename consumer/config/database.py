"""Bounds on every wait for the database, each below the ack deadline: a lock that is never
released, a statement that never ends, a transaction left open or a pool with no free connection
becomes a 503 (Pub/Sub redelivers) before the request watchdog ends the whole worker at the ack
deadline, losing every request in flight on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from consumer.config.fields import Rule, Section, setting
from consumer.config.parse import whole

DERIVED = 0
"""A wait set to 0 is derived from the ack deadline and the safety margin."""
POOL_TIMEOUT_CAP_SECONDS = 30.0
"""SQLAlchemy's own default checkout timeout: a derived one is never longer."""
UPPER = 599
"""Pub/Sub's longest ack deadline is 600 s; a wait must end before it."""


@dataclass(frozen=True)
class DatabaseWaits:
    """The effective bounds, in seconds (``DatabaseSettings.waits``)."""

    statement: float
    lock: float
    idle_in_transaction: float
    pool: float
    lease_join: float


@dataclass(frozen=True, repr=False)
class DatabaseSettings(Section):
    """How long the service waits for the database (PostgreSQL's timeouts are set on every
    connection); each below the ack deadline, 0 derives it from the ack deadline."""

    prefix: ClassVar[str] = "DATABASE_"
    statement_timeout_seconds: int = setting(DERIVED, convert=whole, within=(0, UPPER))
    """PostgreSQL's ``statement_timeout``: a longer statement is cancelled (a 503, redelivered).
    0: the handler budget (ack deadline less the safety margin)."""
    lock_timeout_seconds: int = setting(DERIVED, convert=whole, within=(0, UPPER))
    """PostgreSQL's ``lock_timeout``: a longer wait for a lock is cancelled (a 503, redelivered).
    0: half the handler budget, so the write that records an outcome can still be retried."""
    idle_in_transaction_timeout_seconds: int = setting(DERIVED, convert=whole, within=(0, UPPER))
    """PostgreSQL's ``idle_in_transaction_session_timeout``: a session idle this long inside a
    transaction is ended, and its locks with it. 0: the handler budget."""
    pool_timeout_seconds: int = setting(DERIVED, convert=whole, within=(0, UPPER))
    """Longest wait for a free connection of the pool (a 503 after it). 0: the handler budget,
    at most 30 s."""
    lease_join_seconds: int = setting(DERIVED, convert=whole, within=(0, UPPER))
    """Longest wait, at the end of a sweep, for the job lease keeper's last renewal to end. 0:
    half the safety margin."""

    def waits(self, ack_deadline: float, margin: float) -> DatabaseWaits:
        """The bounds for an ack deadline and safety margin (``CONSUMER_ACK_DEADLINE_SECONDS``,
        ``CONSUMER_SAFETY_MARGIN_SECONDS``), derived where a setting is 0."""
        budget = ack_deadline - margin
        return DatabaseWaits(
            statement=_or(self.statement_timeout_seconds, budget),
            lock=_or(self.lock_timeout_seconds, budget / 2),
            idle_in_transaction=_or(self.idle_in_transaction_timeout_seconds, budget),
            pool=_or(self.pool_timeout_seconds, min(budget, POOL_TIMEOUT_CAP_SECONDS)),
            lease_join=_or(self.lease_join_seconds, margin / 2),
        )

    def below(self, ack_deadline: int) -> list[Rule]:
        """Every wait set must end before the ack deadline (the watchdog's)."""
        return [
            (value < ack_deadline, f"{variable} must be below the ack deadline ({ack_deadline} s)")
            for variable, value in self._set().items()
        ]

    def _set(self) -> dict[str, int]:
        names = (
            "statement_timeout_seconds", "lock_timeout_seconds",
            "idle_in_transaction_timeout_seconds", "pool_timeout_seconds", "lease_join_seconds",
        )  # fmt: skip
        return {f"CONSUMER_{self.prefix}{name.upper()}": getattr(self, name) for name in names}


def _or(value: int, derived: float) -> float:
    return float(value) if value != DERIVED else derived
