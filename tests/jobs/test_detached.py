"""Python jobs longer than one push (``CONSUMER_JOB_MAX_SECONDS``), on SQLite and PostgreSQL: the
sweep returns while the job runs on in its own thread, holding its claim; the job is recorded
``done`` once when it ends, never retried meanwhile; one that overruns its maximum has its lease
lapse and is taken over; a nonsense maximum stops the start with one line."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.errors import SettingsError
from consumer.jobs.kinds import JobContext
from consumer.jobs.model import Job, NewJob, Status
from consumer.jobs.store import JobStore
from consumer.jobs.sweep import Sweeper
from consumer.pipeline.registry import Registry


def _sweeper(database_url: str, engine: Engine, registry: Registry, max_seconds: str) -> Sweeper:
    settings = Settings.of(database_url=database_url, local_mode=True, job_lease_seconds=1,
                           job_max_seconds=max_seconds, job_held_lease_seconds=3)  # fmt: skip
    return Sweeper(settings, engine, registry.job_kinds)


def _status(engine: Engine, job_id: int) -> Job:
    job = JobStore(engine).get(job_id)
    assert job is not None
    return job


def test_a_long_python_job_runs_past_its_sweep_and_completes_once(
    engine: Engine, database_url: str
) -> None:
    runs: list[float] = []
    finished = threading.Event()
    registry = Registry()

    @registry.job_kind("long-py")
    def long_py(context: JobContext, job: Job) -> Any:
        runs.append(context.remaining())
        for _ in range(25):  # 5 s, longer than the sweep's 2 s budget and several leases
            time.sleep(0.2)
            context.heartbeat()
        finished.set()

    job_id = JobStore(engine).enqueue(NewJob("long-py", {}), allow_unknown=True).job_id
    assert job_id is not None
    sweeper = _sweeper(database_url, engine, registry, "long-py=30")
    summary = sweeper.run(time.monotonic() + 2)
    assert summary.claimed == 1 and summary.held == 1 and summary.done == 0
    assert _status(engine, job_id).status is Status.RUNNING
    again = _sweeper(database_url, engine, registry, "long-py=30").run(time.monotonic() + 2)
    assert again.claimed == 0  # its claim is held: no sweep takes it over
    assert finished.wait(15)
    for thread in sweeper.detached.threads:
        thread.join(10)
    job = _status(engine, job_id)
    assert job.status is Status.DONE and job.attempts == 1 and len(runs) == 1
    assert 25 < runs[0] <= 30  # its budget is the kind's maximum, not the sweep's


def test_a_job_past_its_maximum_lapses_and_is_retried(engine: Engine, database_url: str) -> None:
    stop = threading.Event()
    registry = Registry()

    @registry.job_kind("overrun")
    def overrun(context: JobContext, job: Job) -> Any:
        stop.wait(20)  # ignores its maximum

    job_id = JobStore(engine).enqueue(NewJob("overrun", {}), allow_unknown=True).job_id
    assert job_id is not None
    first = _sweeper(database_url, engine, registry, "overrun=1")
    second = _sweeper(database_url, engine, registry, "overrun=1")
    try:
        first.run(time.monotonic() + 2)
        time.sleep(4.5)  # the 1 s maximum, then the 3 s held lease, lapse
        retried = second.run(time.monotonic() + 2)
        assert retried.claimed == 1
        assert _status(engine, job_id).attempts == 2
    finally:
        stop.set()
        for thread in first.detached.threads + second.detached.threads:
            thread.join(10)


@pytest.mark.parametrize("value", ["report=0", "report", "report=1e3", "a=1,a=2", "x=86401"])
def test_a_nonsense_maximum_stops_the_start_with_one_line(value: str) -> None:
    settings = Settings.of(database_url="sqlite://", local_mode=True, job_max_seconds=value)
    with pytest.raises(SettingsError, match=r"^CONSUMER_JOB_MAX_SECONDS: .*") as caught:
        settings.validate()
    assert "\n" not in str(caught.value)
