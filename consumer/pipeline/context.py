"""What a handler is given: its time budget, the database, the settings, the clock, a heartbeat,
and for a one-commit handler the connection of its delivery's transaction."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy import Connection, Engine

from consumer.config.settings import Settings
from consumer.errors import LeaseLost
from consumer.wire.timeutil import Clock, utcnow


@dataclass
class HandlerContext:
    """Passed to every handler. ``remaining()`` is the budget left before the ack deadline."""

    settings: Settings
    engine: Engine
    key: str
    attempt: int
    deadline: float
    """``time.monotonic()`` value by which the handler must have returned."""
    renew_lease: Callable[[], bool] = field(default=lambda: True)
    clock: Clock = utcnow
    """The service's wall clock (the dispatcher's): every time a handler records or compares with
    rows comes from it. Budgets stay on ``time.monotonic()``, which no wall-clock step moves."""
    connection: Connection | None = None
    """A one-commit handler's (``local_effects=True``): the connection whose open transaction
    holds its delivery's claim, and will hold its outcome. Its effects go through it and nowhere
    else, so they commit with the outcome or not at all; it must not commit or roll back.
    ``None`` for every other handler."""

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def heartbeat(self) -> None:
        """Keep the inbox lease of a long handler fresh; raise ``LeaseLost`` if it was taken."""
        if not self.renew_lease():
            raise LeaseLost(f"lease on {self.key} was lost")
