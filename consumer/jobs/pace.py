"""The sweep's pace: running estimates of how long a job and a write take, which size each
batch to the time left and keep back the time to record it."""

from __future__ import annotations

from dataclasses import dataclass

FIRST_BATCH = 10
"""The first batch is small: it measures how long this sweep's jobs take."""
MIN_RESERVE_SECONDS = 0.1
"""At least this is kept back: on a loaded machine a write took 70-180 ms longer than the
running estimate said, and the sweep outlived its budget by that much (tests/jobs/
test_sweep_leases.py's budget test ran within that margin of its limit)."""


@dataclass
class Pace:
    """Running estimates that size batches to the time left."""

    job_seconds: float = 0.0
    write_seconds: float = MIN_RESERVE_SECONDS
    slowest_write: float = 0.0
    """The longest write this sweep has seen: the average forgets a stall that may come again."""

    def reserve(self) -> float:
        """Time kept back to record the batch."""
        return max(MIN_RESERVE_SECONDS, 2 * self.write_seconds, self.slowest_write)

    def batch_size(self, available: float, limit: int, first: bool) -> int:
        if available <= self.job_seconds:
            return 0
        if first:
            return min(limit, FIRST_BATCH)
        if self.job_seconds <= 0:
            return limit
        return min(limit, int(available / self.job_seconds))

    def observe_job(self, seconds: float) -> None:
        self.job_seconds = (
            seconds if self.job_seconds <= 0 else 0.7 * self.job_seconds + 0.3 * seconds
        )

    def observe_write(self, seconds: float) -> None:
        self.write_seconds = 0.7 * self.write_seconds + 0.3 * seconds
        self.slowest_write = max(self.slowest_write, seconds)
