"""A claimed batch, what became of its jobs, and how much of that is recorded yet.

The sweep records results as it goes (``Flushes`` says when), not once per batch: a sweeper
killed mid-batch leaves unrecorded only the job it was running and the fast jobs it finished
within the last flush window, so a takeover repeats at most those effects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from consumer.jobs.model import Failure, Job, Written

NOTHING = Written(0, 0, 0, 0)


def plus(a: Written, b: Written) -> Written:
    return Written(
        a.done + b.done, a.retried + b.retried, a.dead + b.dead, a.released + b.released,
        a.held + b.held,
    )  # fmt: skip


@dataclass
class Batch:
    """One claim's jobs and what became of them. ``done`` and ``failures`` hold every result of
    the batch; the first ``done_mark`` and ``failure_mark`` of them are recorded."""

    token: str
    jobs: list[Job]
    requested: int
    done: list[int] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    unrun: list[int] = field(default_factory=list)
    held: list[int] = field(default_factory=list)
    """Jobs whose target answered 202: they stay running under the claim."""
    held_mark: int = 0
    recorded: Written = NOTHING
    """What the flushes made while the batch ran recorded (the last write adds the rest)."""
    done_mark: int = 0
    failure_mark: int = 0
    lost: bool = False
    """A flush found rows taken over (the lease ran out): none of the rest is started."""

    def unrecorded(self) -> tuple[list[int], list[Failure]]:
        """The results no write has recorded yet."""
        return self.done[self.done_mark :], self.failures[self.failure_mark :]

    def pending(self) -> bool:
        return (
            len(self.done) > self.done_mark or len(self.failures) > self.failure_mark
            or self.holding()
        )  # fmt: skip

    def holding(self) -> bool:
        """A held job's longer lease is not written yet (it is, before another job starts)."""
        return len(self.held) > self.held_mark

    def mark_recorded(self, done: int, failures: int, written: Written) -> None:
        """The first ``done`` and ``failures`` results were written, with ``written`` rows."""
        self.done_mark, self.failure_mark = done, failures
        self.recorded = plus(self.recorded, written)


class Flushes:
    """When the sweep records the results it holds: right after a job that took longer than a
    commit (so a slow effect is recorded before the next one starts), and at least every
    ``window`` seconds for fast ones (a batch of no-op jobs stays one write)."""

    def __init__(self, window: float) -> None:
        self.window = window
        self.commit_seconds = 0.0
        """Running estimate of one flush; 0 until measured, so the first job is recorded alone."""
        self.oldest: float | None = None
        """``time.monotonic()`` when the oldest unrecorded result was made."""

    def begin(self) -> None:
        """A new batch: nothing is held yet."""
        self.oldest = None

    def due(self, started: float, ended: float) -> bool:
        """A job ran from ``started`` to ``ended``: record now?"""
        if self.oldest is None:
            self.oldest = ended
        return ended - started >= self.commit_seconds or ended - self.oldest >= self.window

    def recorded(self, seconds: float) -> None:
        """Everything held was recorded, in a write that took ``seconds``."""
        self.oldest = None
        self.commit_seconds = (
            seconds if self.commit_seconds <= 0 else 0.7 * self.commit_seconds + 0.3 * seconds
        )
