"""Fixtures for the jobs tests: an engine with the effect-recording table, a kind registry and
sweep settings (the clock, following the real one until moved, is the shared ``clock``)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, func, select

from bench.support import smtp_server
from bench.support.smtp_server import Recorder
from consumer import NewJob, enqueue_many
from consumer.config.settings import Settings
from consumer.jobs.schema import jobs
from consumer.jobs.sweep import Sweeper, SweepSummary
from consumer.pipeline.extensions import JobKinds
from consumer.pipeline.registry import Registry
from tests.conftest import Clock
from tests.jobs import kinds_plugin


@pytest.fixture
def runs_engine(engine: Engine) -> Iterator[Engine]:
    kinds_plugin.runs_metadata.create_all(engine)
    yield engine


@pytest.fixture
def kinds() -> JobKinds:
    registry = Registry()
    kinds_plugin.register(registry)
    return registry.job_kinds


@pytest.fixture
def job_settings(database_url: str) -> Settings:
    return Settings.of(
        database_url=database_url,
        local_mode=True,
        sweep_batch_size=20,
        job_max_attempts=3,
        job_retry_base_seconds=10,
        job_retry_max_seconds=100,
    )


def sweep(
    settings: Settings,
    engine: Engine,
    kinds: JobKinds,
    clock: Clock | None = None,
    budget: float = 30,
) -> SweepSummary:
    sweeper = Sweeper(settings, engine, kinds, clock or Clock())
    return sweeper.run(time.monotonic() + budget)


def add(engine: Engine, count: int, kind: str = "record", **payload: object) -> list[int]:
    """``count`` jobs of ``kind``; the ids of every job in the table."""
    with engine.begin() as connection:
        jobs_ = [NewJob(kind, dict(payload)) for _ in range(count)]
        enqueue_many(connection, jobs_, allow_unknown=True)  # the kinds fixture may not be held
    with engine.connect() as connection:
        return list(connection.execute(select(jobs.c.id).order_by(jobs.c.id)).scalars())


def statuses(engine: Engine) -> dict[int, str]:
    with engine.connect() as connection:
        rows = connection.execute(select(jobs.c.id, jobs.c.status)).all()
    return {int(job_id): str(status) for job_id, status in rows}


def job_count(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(jobs)).scalar_one())


@pytest.fixture
def smtp() -> Iterator[Recorder]:
    """A plain SMTP server on loopback."""
    recorder = Recorder()
    controller = smtp_server.start(recorder)
    yield recorder
    controller.stop()
