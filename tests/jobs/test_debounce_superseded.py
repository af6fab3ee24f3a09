"""A debounced job that runs while a later enqueue of its debounce key makes a new pending job,
on SQLite and PostgreSQL: when the first fails (or is released unrun), it is not written back to
``pending`` beside the later one (the unique index refused that, and the sweep's write failed
with its whole batch unrecorded); it ends ``cancelled``, and the later job runs once, with the
later payload."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from consumer import NewJob, enqueue
from consumer.config.settings import Settings
from consumer.jobs.model import Debounce, Failure, Job
from consumer.jobs.schema import jobs
from consumer.jobs.store import JobStore
from consumer.jobs.sweep import Sweeper
from consumer.pipeline.extensions import JobKinds
from consumer.wire.timeutil import utcnow

KIND = "call"
DEBOUNCE = Debounce("account-9", quiet=1, max_wait=60)


def rows(engine: Engine) -> dict[int, tuple[str, Any, str | None]]:
    query = select(jobs.c.id, jobs.c.status, jobs.c.payload, jobs.c.last_error).order_by(jobs.c.id)
    with engine.connect() as connection:
        return {
            row.id: (row.status, row.payload, row.last_error) for row in connection.execute(query)
        }


def due_now(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(update(jobs).values(run_at=jobs.c.created_at))


def test_a_failed_run_beside_a_later_pending_job_ends_cancelled_and_the_later_one_runs(
    engine: Engine, job_settings: Settings
) -> None:
    first = enqueue(engine, KIND, {"n": 1}, allow_unknown=True, debounce=DEBOUNCE).job_id
    due_now(engine)
    ran: list[tuple[int, Any]] = []

    def call(_context: Any, job: Job) -> None:
        ran.append((job.id, job.payload))
        if job.id == first:  # while it runs, the key is enqueued again: a new pending job
            enqueue(engine, KIND, {"n": 2}, allow_unknown=True, debounce=DEBOUNCE)
            raise RuntimeError("the first run failed")

    kinds = JobKinds()
    kinds.add(KIND, call)
    summary = Sweeper(job_settings, engine, kinds).run(time.monotonic() + 10)
    assert summary.claimed == 1
    [(status, _, error), (later_status, payload, _)] = rows(engine).values()
    assert (status, later_status, payload) == ("cancelled", "pending", {"n": 2})
    assert "the first run failed" in (error or "")
    due_now(engine)
    Sweeper(job_settings, engine, kinds).run(time.monotonic() + 10)
    assert [payload for _, payload in ran] == [{"n": 1}, {"n": 2}]
    assert [status for status, _, _ in rows(engine).values()] == ["cancelled", "done"]


def test_a_released_or_retried_job_beside_a_later_pending_job_ends_cancelled(
    engine: Engine,
) -> None:
    store, now = JobStore(engine), utcnow()
    first = enqueue(engine, KIND, {"n": 1}, allow_unknown=True, debounce=DEBOUNCE).job_id
    with engine.begin() as connection:  # as a claim leaves it
        connection.execute(update(jobs).values(status="running", claimed_by="claim-1", attempts=1))
    second = enqueue(engine, KIND, {"n": 2}, allow_unknown=True, debounce=DEBOUNCE).job_id
    written = store.complete("claim-1", now, released=[first])
    assert written.released == 1
    assert rows(engine)[first][0] == "cancelled" and rows(engine)[second][0] == "pending"
    assert store.retry(now, first) == 0, "retried beside the later pending job of its key"

    alone = enqueue(engine, KIND, {"n": 3}, allow_unknown=True, debounce=Debounce("b", 1, 60))
    with engine.begin() as connection:
        connection.execute(
            update(jobs).where(jobs.c.id == alone.job_id).values(status="running", claimed_by="c-2")
        )
    retry = Failure(alone.job_id, dead=False, run_at=now, error="boom", errors=[])
    store.complete("c-2", now, failures=[retry])
    assert rows(engine)[alone.job_id][0] == "pending", "alone, its key's retry is a retry"


@pytest.mark.postgres
def test_a_retry_that_meets_the_later_job_uncommitted_waits_for_it_and_ends_cancelled(
    pg_engine: Engine,
) -> None:
    """The later job's transaction is open when the first job's retry is written: the retry's
    own check cannot see it, the unique index waits for it and refuses the write; the write runs
    again once that transaction commits (``consumer.jobs.debounce_race``)."""
    store, now = JobStore(pg_engine), utcnow()
    first = enqueue(pg_engine, KIND, {"n": 1}, allow_unknown=True, debounce=DEBOUNCE).job_id
    with pg_engine.begin() as connection:
        connection.execute(update(jobs).values(status="running", claimed_by="claim-1"))
    written: list[Any] = []
    retry = Failure(first, dead=False, run_at=now, error="boom", errors=[])
    writer = threading.Thread(
        target=lambda: written.append(store.complete("claim-1", now, failures=[retry]))
    )
    with pg_engine.begin() as producer:
        later = NewJob(KIND, {"n": 2}, debounce=DEBOUNCE)
        store.enqueue(later, allow_unknown=True, connection=producer)
        writer.start()
        time.sleep(0.5)  # the retry's write now waits on the later job's index entry
        assert writer.is_alive() and not written
    writer.join(timeout=10)
    assert written and written[0].retried == 1, written
    assert [status for status, _, _ in rows(pg_engine).values()] == ["cancelled", "pending"]
