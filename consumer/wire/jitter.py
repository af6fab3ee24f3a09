"""Jitter of tick tasks: a task may spread its runs over a window after each slot's start, so
many tasks on one schedule do not all start at once. The offset is a hash of the task and the
slot: stable whichever scheduler sent the tick, and on every pod. Pure: no I/O, no clock."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta
from typing import Any

DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*")
UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_jitter(text: str) -> float | None:
    """A window of seconds: ``30s``, ``5m``, ``500ms``, ``1h`` or a bare number of seconds
    (``None``: not a duration)."""
    match = DURATION.fullmatch(text)
    return None if match is None else float(match[1]) * UNITS[match[2] or "s"]


def offset(task: str, slot: datetime, window: float) -> float:
    """Seconds after ``slot`` at which ``task``'s run of it starts: in ``[0, window)``."""
    if window <= 0:
        return 0.0
    digest = hashlib.sha256(f"{task}\0{slot.isoformat()}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * window


def start_of(task: str, slot: datetime, window: float) -> datetime:
    """When ``task``'s run of ``slot`` starts."""
    return slot + timedelta(seconds=offset(task, slot, window))


def shortest_gap(schedule: Any, after: datetime, fires: int = 50) -> float:
    """The fewest seconds between two of the schedule's next ``fires`` slots from ``after``."""
    slot, gaps = schedule.slot_of(after), []
    for _ in range(fires):
        following = schedule.following(slot)
        gaps.append((following - slot).total_seconds())
        slot = following
    return min(gaps)
