"""NOTIFY on enqueue: a job due now starts the moment the transaction that enqueued it commits.

On PostgreSQL the jobs table NOTIFYs channel ``consumer_jobs`` itself: a statement-level
``AFTER INSERT`` trigger (migration ``0013_notify_trigger``) fires once per statement that
inserts a pending job due within a second, whoever inserted it (Python's ``enqueue`` and
``enqueue_many``, the jobs topic, the job API, ``consumer_enqueue``, a team's own ``COPY``), but
a file import, which opts out (``consumer.jobs.bulk_queries.QUIET_NOTIFY``).
``pg_notify`` runs inside the inserting transaction, so PostgreSQL delivers it only when that
transaction commits, never after a rollback, and equal notifications of one transaction fold
into one. Every serving process LISTENs on the channel (``consumer.jobs.listen``). ``due`` is
for what inserts nothing: a job API retry moves an existing row back to pending. SQLite has no
NOTIFY: there, and for pods that cannot LISTEN, the Pub/Sub wake-up (``consumer.jobs.wake``)
and the ``sweep`` tick remain.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import Connection, text

from consumer.db.dialect import POSTGRESQL
from consumer.wire.timeutil import utcnow

CHANNEL = "consumer_jobs"
NOTIFY = text(f"SELECT pg_notify('{CHANNEL}', '')")


def due(connection: Connection, run_ats: Iterable[datetime | None]) -> bool:
    """NOTIFY in ``connection``'s transaction when any of the enqueued jobs' ``run_ats`` is due
    now (``None``: now); whether it did. A later job waits for its tick, as any scheduled job."""
    if connection.dialect.name != POSTGRESQL:
        return False
    now = utcnow()
    if not any(run_at is None or run_at <= now for run_at in run_ats):
        return False
    connection.execute(NOTIFY)
    return True
