"""Retry timing and the error history of a failed job."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from consumer.wire import text

MAX_ERROR_CHARS = 2000
MAX_HISTORY = 100


def backoff_seconds(
    attempt: int, base: float, cap: float, rng: random.Random | None = None
) -> float:
    """Exponential backoff with "equal jitter": a delay in [d/2, d] where d = base * 2^(n-1),
    capped. Retries of many jobs that failed together spread out, yet each job's next delay is
    never shorter than its previous one."""
    ceiling = min(cap, base * 2 ** max(attempt - 1, 0))
    return ceiling / 2 + (rng or random).uniform(0, ceiling / 2)


def next_run_at(now: datetime, attempt: int, base: float, cap: float) -> datetime:
    return now + timedelta(seconds=backoff_seconds(attempt, base, cap))


def describe(exc: BaseException) -> str:
    return text.describe(exc, MAX_ERROR_CHARS)


def with_error(
    history: Sequence[Mapping[str, Any]], attempt: int, at: datetime, error: str
) -> list[dict[str, Any]]:
    """The history plus this failure, oldest first, keeping the last ``MAX_HISTORY``."""
    entry = {"attempt": attempt, "at": at.isoformat(), "error": error}
    return [*(dict(item) for item in history), entry][-MAX_HISTORY:]
