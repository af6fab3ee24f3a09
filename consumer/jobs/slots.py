"""When each claimed job of a rate-limited kind may start: the rate gives a claim's jobs their
slots (``limits.slots``), and the sweep waits for each job's before running it."""

from __future__ import annotations

import time
from datetime import datetime

from consumer.jobs.model import Job


class StartSlots:
    """One sweeper's start slots (``time.monotonic()`` values) of the rate-limited jobs it
    claimed, and its last start of each kind."""

    def __init__(self) -> None:
        self._slots: dict[int, tuple[float, float, str | None]] = {}
        """Claimed jobs of rate-limited kinds or groups: when each may start, the rate's interval,
        and what it spaces (``None``: the kind; else the group's key)."""
        self._last_start: dict[str, float] = {}

    def schedule(
        self,
        claimed: list[Job],
        slots: list[datetime],
        now: datetime,
        interval: float,
        key: str | None = None,
    ) -> None:
        """Give ``claimed`` (in id order) the ``slots`` the rate allotted them at ``now`` (a
        job both its kind's and its group's rate gave a slot starts at the later)."""
        base = time.monotonic()
        for job, slot in zip(sorted(claimed, key=lambda job: job.id), slots, strict=True):
            at = base + (slot - now).total_seconds()
            earlier = self._slots.get(job.id)
            if earlier is None or earlier[0] < at:
                self._slots[job.id] = (at, interval, key)

    def waiting(self) -> bool:
        """Whether a claimed job has a start slot to wait for (none: ``start_at`` returns at
        once for every job, and the sweep skips it)."""
        return bool(self._slots)

    def start_at(self, job: Job) -> None:
        """Wait for the start slot the rate gave ``job`` (none: start now), and at least an
        interval after this sweeper's previous start of the kind: a sweeper running behind its
        slots spaces its late starts instead of bunching them."""
        scheduled = self._slots.pop(job.id, None)
        if scheduled is None:
            return
        slot, interval, key = scheduled
        spaced = job.kind if key is None else key
        start = max(slot, self._last_start.get(spaced, float("-inf")) + interval)
        if start > time.monotonic():
            time.sleep(start - time.monotonic())
        self._last_start[spaced] = time.monotonic()
