"""The demo's workload: N email jobs to N distinct recipients, so every extra delivery to a
recipient is a duplicate and every recipient without one is a loss."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from sqlalchemy import Engine

from consumer.jobs.model import NewJob
from consumer.jobs.store import enqueue_many

CHUNK = 5_000


def recipient(number: int) -> str:
    return f"user{number}@example.com"


def enqueue_emails(engine: Engine, count: int) -> None:
    for start in range(0, count, CHUNK):
        jobs = [
            NewJob("email", {"to": recipient(n), "subject": "Your report", "text": "Hello."})
            for n in range(start, min(count, start + CHUNK))
        ]
        with engine.begin() as connection:
            enqueue_many(connection, jobs)


@dataclass(frozen=True)
class Tally:
    """What the sink saw, against what was enqueued."""

    enqueued: int
    delivered: int
    recipients_reached: int
    recipients_with_duplicates: int
    extra_copies: int

    @property
    def lost(self) -> int:
        return self.enqueued - self.recipients_reached

    @classmethod
    def of(cls, enqueued: int, received: Counter[str]) -> Tally:
        expected = {recipient(n) for n in range(enqueued)}
        reached = {address for address in received if address in expected}
        return cls(
            enqueued=enqueued,
            delivered=sum(received.values()),
            recipients_reached=len(reached),
            recipients_with_duplicates=sum(1 for count in received.values() if count > 1),
            extra_copies=sum(count - 1 for count in received.values() if count > 1),
        )
