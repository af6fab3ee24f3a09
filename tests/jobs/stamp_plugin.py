"""A job kind that stamps when each job started: ``stamp`` inserts (job id, wall-clock start,
payload) into ``test_job_starts``, so a test or a bench measures commit-to-start latency from
the database. It declares ``n`` as its only producer field. Loaded through
``CONSUMER_PLUGINS=tests.jobs.stamp_plugin``."""

from __future__ import annotations

import time

from sqlalchemy import JSON, Column, Engine, Float, Integer, MetaData, Table, insert, select

from consumer import Job
from consumer.jobs.fields import kind
from consumer.jobs.kinds import JobContext
from consumer.pipeline.registry import Registry

KIND = "stamp"
starts_metadata = MetaData()
starts = Table(
    "test_job_starts",
    starts_metadata,
    Column("job_id", Integer, primary_key=True, autoincrement=False),
    Column("started", Float, nullable=False, comment="time.time() when the handler began"),
    Column("payload", JSON, nullable=False),
)


def stamp(context: JobContext, job: Job) -> None:
    started = time.time()
    with context.engine.begin() as connection:
        connection.execute(
            insert(starts).values(job_id=job.id, started=started, payload=job.payload)
        )


def started(engine: Engine) -> dict[int, float]:
    """Job id -> when its handler began."""
    with engine.connect() as connection:
        return {
            int(i): float(t)
            for i, t in connection.execute(select(starts.c.job_id, starts.c.started))
        }


def register(registry: Registry) -> None:
    registry.job_kinds.add(KIND, kind(stamp, ["n"]))
