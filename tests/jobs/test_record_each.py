"""A kind declared ``record_each`` has every result recorded before its next job starts, however
fast the job: a sweeper killed mid-batch then repeats only the job it was running. The built-in
``email`` kind is declared so (``consumer demo`` kills a pod mid-sweep and counts the emails
sent twice at a real SMTP sink that answers faster than a commit)."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import Engine, func, select

from consumer import Job
from consumer.cli.jobs import run_sweep_once
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.errors import AlreadyRegistered
from consumer.jobs.batch import Flushes
from consumer.jobs.kinds import JobContext
from consumer.jobs.pace import FIRST_BATCH
from consumer.jobs.schema import jobs
from consumer.jobs.sweep import Sweeper
from consumer.pipeline.registry import Registry
from consumer.plugins import build_registry
from consumer.service import Service
from tests.jobs.conftest import add

JOBS = 60


class UnrecordedAtStart:
    """A no-op kind that notes, as each job starts, how many of the jobs it ran before are not
    recorded yet (still ``running``), read on a connection of its own."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.connection = engine.connect()
        self.ran: list[int] = []
        self.unrecorded: list[int] = []

    def __call__(self, context: JobContext, job: Job) -> None:
        if self.ran:
            running = jobs.c.id.in_(self.ran) & (jobs.c.status == "running")
            count = self.connection.execute(select(func.count()).where(running)).scalar_one()
            self.connection.rollback()  # the next read takes a fresh snapshot
            self.unrecorded.append(int(count))
        self.ran.append(job.id)

    def close(self) -> None:
        self.connection.close()
        self.engine.dispose()


@pytest.fixture
def window_never_closes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every job counts as fast and the flush window never ends: whether a result is recorded
    before the next job starts no longer depends on how fast this machine commits."""
    monkeypatch.setattr(Flushes, "due", lambda self, started, ended: False)


@pytest.mark.parametrize("record_each", [True, False], ids=["declared", "default"])
@pytest.mark.usefixtures("window_never_closes")
def test_a_kind_declared_record_each_finds_every_earlier_job_recorded(
    engine: Engine, database_url: str, record_each: bool
) -> None:
    """The default kind is the contrast: its results wait for the end of their batch."""
    observer = UnrecordedAtStart(make_engine(database_url))
    registry = Registry()
    registry.job_kind("noop", record_each=record_each)(observer)
    add(engine, JOBS, "noop")
    settings = Settings.of(database_url=database_url, local_mode=True, sweep_batch_size=JOBS)
    kinds, each = registry.job_kinds, registry.record_each_kinds
    try:
        summary = Sweeper(settings, engine, kinds, record_each=each).run(time.monotonic() + 60)
    finally:
        observer.close()
    assert summary.done == JOBS and len(observer.unrecorded) == JOBS - 1
    if record_each:
        assert set(observer.unrecorded) == {0}, observer.unrecorded
    else:
        first = observer.unrecorded[: FIRST_BATCH - 1]  # later batches start with nothing held
        assert first == list(range(1, FIRST_BATCH)), observer.unrecorded


def test_replacing_a_kind_replaces_its_declaration_and_a_refusal_changes_nothing() -> None:
    registry = Registry()
    registry.job_kind("sms", record_each=True)(lambda context, job: None)
    assert registry.record_each_kinds == {"sms"}
    with pytest.raises(AlreadyRegistered):
        registry.job_kind("sms")(lambda context, job: None)
    assert registry.record_each_kinds == {"sms"}
    registry.job_kind("sms", replace=True)(lambda context, job: None)
    assert registry.record_each_kinds == set()


def test_the_email_kind_is_declared_record_each(settings: Settings) -> None:
    assert "email" in build_registry(settings).record_each_kinds


@pytest.mark.postgres
@pytest.mark.usefixtures("window_never_closes")
def test_the_sweep_task_honours_the_declaration(postgres_url: str) -> None:
    """Through the registered sweep task (``consumer sweep --once``), as ticks run it."""
    settings = Settings.of(database_url=postgres_url, local_mode=True, sweep_batch_size=JOBS)
    service = Service.of(settings)
    observer = UnrecordedAtStart(make_engine(postgres_url))
    service.registry.job_kind("noop", record_each=True)(observer)
    try:
        add(service.engine, JOBS, "noop")
        summary = run_sweep_once(service)
    finally:
        service.close()
        observer.close()
    assert summary["done"] == JOBS
    assert set(observer.unrecorded) == {0}, observer.unrecorded
