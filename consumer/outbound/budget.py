"""How much of a handler's time an outbound call may take: what is left of its budget, less a
reserve for recording the run. Shared by the cache warmer and HTTP targets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

MIN_REQUEST_SECONDS = 0.05
"""A request is not started with less budget than this."""
RESERVE_SECONDS = 0.5
"""Kept back from the handler's budget to record the run and finish the inbox row."""


@dataclass(frozen=True)
class Budget:
    """The handler's remaining time, less the reserve for recording the run."""

    remaining: Callable[[], float]

    def left(self) -> float:
        return self.remaining() - RESERVE_SECONDS

    def allows(self, seconds: float) -> bool:
        return self.left() >= seconds

    def timeout(self, wanted: float) -> float:
        return max(MIN_REQUEST_SECONDS, min(wanted, self.left()))
