"""Test job kinds with a deliberately NON-idempotent effect: each run inserts a row into
``test_job_runs``, so a job that ran twice shows up as two rows. Loaded by subprocesses and
servers through ``CONSUMER_PLUGINS=tests.jobs.kinds_plugin``.

Payload keys steer a run: ``sleep`` (seconds before the effect), ``fail`` (``always``: a
retryable error; ``permanent``; ``until:N``: fail attempts below N).
"""

from __future__ import annotations

import os
import time

from sqlalchemy import Column, Engine, Integer, MetaData, Table, func, insert, select

from consumer import Job
from consumer.errors import Permanent
from consumer.jobs.kinds import JobContext
from consumer.pipeline.registry import Registry

runs_metadata = MetaData()
runs = Table(
    "test_job_runs",
    runs_metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("pid", Integer, nullable=False),
)


class Flaky(Exception):
    """The test asked this attempt to fail."""


def record(context: JobContext, job: Job) -> None:
    payload = job.payload if isinstance(job.payload, dict) else {}
    time.sleep(float(payload.get("sleep", 0)))
    fail = str(payload.get("fail", ""))
    if fail == "permanent":
        raise Permanent("the test said so")
    if fail == "always" or (fail.startswith("until:") and job.attempts < int(fail[6:])):
        raise Flaky(f"attempt {job.attempts} fails on purpose")
    with context.engine.begin() as connection:
        connection.execute(
            insert(runs).values(job_id=job.id, attempt=job.attempts, pid=os.getpid())
        )


def run_counts(engine: Engine) -> dict[int, int]:
    """Job id -> how many times its effect happened."""
    query = select(runs.c.job_id, func.count()).group_by(runs.c.job_id)
    with engine.connect() as connection:
        return {int(job_id): int(n) for job_id, n in connection.execute(query)}


def register(registry: Registry) -> None:
    registry.job_kinds.add("record", record)
