"""The ``sweep`` and ``cleanup`` tick tasks through the real dispatcher (inbox included)."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select, update

from consumer import enqueue
from consumer.config.settings import Settings
from consumer.jobs import cleanup as cleanup_task
from consumer.jobs.schema import jobs
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.wire.events import TickEvent
from consumer.wire.message import PushMessage
from consumer.wire.outcomes import Kind
from consumer.wire.schedule import Every
from consumer.wire.timeutil import utcnow

CHUNKED = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
"""The jobs purged row by row: SQLite's. PostgreSQL's are partitioned by epoch and dropped an epoch
at a time (tests/jobs/test_epoch_retire.py)."""


def tick(task: str, message_id: str = "m1") -> PushMessage:
    return PushMessage(message_id, utcnow(), attributes={"task": task})


def test_the_sweep_tick_runs_built_in_email_jobs_once(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    settings = settings.with_values(maildir_path=str(tmp_path / "md"))
    registry = build_registry(settings)
    assert registry.schedule_of("sweep") == Every(300) and "email" in registry.job_kinds
    enqueue(engine, "email", {"to": "a@example.com", "text": "hi"})
    dispatcher = Dispatcher(settings, engine, registry)
    first = dispatcher.dispatch(tick("sweep"))
    assert first.kind is Kind.DONE and first.http_status == 200
    assert (first.details["claimed"], first.details["done"], first.details["still_due"]) == (
        1,
        1,
        0,
    )
    assert 0 < first.details["budget_left"] <= settings.handler_budget_seconds
    again = dispatcher.dispatch(tick("sweep", message_id="m2"))  # Scheduler ran the job twice
    assert again.kind is Kind.DUPLICATE
    assert len(list((tmp_path / "md" / "new").iterdir())) == 1


@CHUNKED
def test_cleanup_purges_finished_jobs_past_retention(engine: Engine, settings: Settings) -> None:
    old = enqueue(engine, "email", {}).job_id
    recent = enqueue(engine, "email", {}).job_id
    waiting = enqueue(engine, "email", {}, run_at=utcnow() + timedelta(days=60)).job_id
    with engine.begin() as connection:
        for job_id, days in ((old, 30), (recent, 1)):
            connection.execute(
                update(jobs)
                .where(jobs.c.id == job_id)
                .values(status="done", finished_at=utcnow() - timedelta(days=days))
            )
    outcome = Dispatcher(settings, engine, build_registry(settings)).dispatch(tick("cleanup"))
    assert outcome.kind is Kind.DONE and outcome.details["jobs_purged"] == 1
    with engine.connect() as connection:
        left = set(connection.execute(jobs.select().with_only_columns(jobs.c.id)).scalars())
    assert left == {recent, waiting}


def finished_jobs(engine: Engine, count: int) -> None:
    now, old = utcnow(), utcnow() - timedelta(days=30)
    row = {"kind": "email", "payload": {}, "status": "done", "priority": 0, "run_at": now,
           "attempts": 1, "created_at": old, "updated_at": old, "finished_at": old}  # fmt: skip
    with engine.begin() as connection:
        connection.execute(jobs.insert(), [row] * count)


def cleanup_context(settings: Settings, engine: Engine, seconds: float) -> HandlerContext:
    deadline = time.monotonic() + seconds
    return HandlerContext(settings, engine, "tick:cleanup", 1, deadline, lambda: True)


@CHUNKED
def test_cleanup_purges_in_chunks_and_stops_when_the_budget_is_low(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cleanup_task, "CHUNK_ROWS", 500)
    finished_jobs(engine, 3200)
    event = TickEvent("cleanup", utcnow(), Every(86400), tick("cleanup"))
    spent = cleanup_task.cleanup(cleanup_context(settings, engine, 0.0), event)
    assert (spent["jobs_purged"], spent["more"]) == (500, True)  # one chunk, then it stopped
    rest = cleanup_task.cleanup(cleanup_context(settings, engine, 60.0), event)
    assert (rest["jobs_purged"], rest["more"]) == (2700, False)
    with engine.connect() as connection:
        assert connection.scalar(select(func.count()).select_from(jobs)) == 0


@CHUNKED
def test_cleanup_rests_after_each_full_chunk_in_proportion_to_it(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    rests: list[float] = []
    monkeypatch.setattr(cleanup_task, "CHUNK_ROWS", 500)
    monkeypatch.setattr(cleanup_task.time, "sleep", rests.append)
    finished_jobs(engine, 1200)
    event = TickEvent("cleanup", utcnow(), Every(86400), tick("cleanup"))
    started = time.monotonic()
    spent = cleanup_task.cleanup(cleanup_context(settings, engine, 60.0), event)
    elapsed = time.monotonic() - started
    assert (spent["jobs_purged"], spent["more"]) == (1200, False)
    # Two full chunks, each followed by its rest; the short last chunk ends the purge at once.
    assert len(rests) == 2, rests
    assert all(0 < rest <= elapsed * cleanup_task.PAUSE_RATIO for rest in rests), rests


@CHUNKED
def test_a_rest_never_eats_into_the_budgets_reserve(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    rests: list[float] = []
    monkeypatch.setattr(cleanup_task, "CHUNK_ROWS", 500)
    monkeypatch.setattr(cleanup_task, "PAUSE_RATIO", 1e6)
    monkeypatch.setattr(cleanup_task.time, "sleep", rests.append)
    finished_jobs(engine, 1200)
    event = TickEvent("cleanup", utcnow(), Every(86400), tick("cleanup"))
    cleanup_task.cleanup(cleanup_context(settings, engine, 60.0), event)
    reserve = min(cleanup_task.RESERVE_SECONDS, settings.handler_budget_seconds / 2)
    assert rests and all(rest <= 60.0 - reserve for rest in rests), rests
