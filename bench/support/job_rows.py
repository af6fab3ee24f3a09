"""Job rows for the job tests and the fault matrix: e-mails enqueued in one transaction, and the
count of jobs in each status."""

from __future__ import annotations

from sqlalchemy import Engine, func, select

from consumer import NewJob, enqueue_many
from consumer.jobs.schema import jobs


def add_emails(engine: Engine, count: int) -> None:
    with engine.begin() as connection:
        enqueue_many(
            connection,
            [NewJob("email", {"to": f"user{i}@example.com", "text": "hi"}) for i in range(count)],
        )


def status_counts(engine: Engine) -> dict[str, int]:
    query = select(jobs.c.status, func.count()).group_by(jobs.c.status)
    with engine.connect() as connection:
        return {str(status): int(n) for status, n in connection.execute(query)}
