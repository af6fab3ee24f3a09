"""Cancelling a running job (``JobStore.request_cancel``), on SQLite and PostgreSQL: a pending job
is cancelled at once; a running one gets the request recorded, its lease heartbeat reads it, a
Python handler sees it through ``context.heartbeat()``, and the job ends ``cancelled`` whatever
the handler returns or raises after: never retried."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.jobs.kinds import JobContext
from consumer.jobs.model import CancelOutcome, Failure, Job, JobCancelled, NewJob, Status
from consumer.jobs.store import JobStore
from consumer.jobs.sweep import Sweeper
from consumer.pipeline.registry import Registry
from consumer.wire.timeutil import utcnow


def _claimed(engine: Engine, kind: str = "slow", lease: float = 30) -> tuple[JobStore, int]:
    store = JobStore(engine)
    job_id = store.enqueue(NewJob(kind, {}), allow_unknown=True).job_id
    assert job_id is not None
    now = utcnow()
    claimed = store.claim("claim-1", 10, [kind], now, now + timedelta(seconds=lease))
    assert [job.id for job in claimed] == [job_id]
    return store, job_id


def _status(store: JobStore, job_id: int) -> Status:
    job = store.get(job_id)
    assert job is not None
    return job.status


def test_each_answer_of_request_cancel(engine: Engine) -> None:
    store = JobStore(engine)
    pending = store.enqueue(NewJob("slow", {}), allow_unknown=True).job_id
    assert pending is not None
    assert store.request_cancel(pending, utcnow()) is CancelOutcome.CANCELLED
    assert _status(store, pending) is Status.CANCELLED
    assert store.request_cancel(pending, utcnow()) is CancelOutcome.FINISHED
    assert store.request_cancel(10**9, utcnow()) is CancelOutcome.UNKNOWN
    store, running = _claimed(engine)
    assert store.request_cancel(running, utcnow()) is CancelOutcome.REQUESTED
    job = store.get(running)
    assert job is not None and job.status is Status.RUNNING and job.cancel_requested_at
    assert store.request_cancel(running, utcnow()) is CancelOutcome.REQUESTED  # asked twice


def test_the_heartbeat_reads_the_request_and_any_result_ends_cancelled(engine: Engine) -> None:
    store, done = _claimed(engine)
    later = utcnow() + timedelta(seconds=60)
    assert store.renew("claim-1", later).cancelled == frozenset()
    store.request_cancel(done, utcnow())
    assert store.renew("claim-1", later).cancelled == {done}
    written = store.complete("claim-1", utcnow(), done=[done])  # the handler returned normally
    assert written.done == 1 and _status(store, done) is Status.CANCELLED


def test_a_job_cancelled_while_it_ran_then_retried_runs_to_done(engine: Engine) -> None:
    """The retry spends the old request: the job is not cancelled again at its next heartbeat
    nor at its finish."""
    store, job_id = _claimed(engine)
    store.request_cancel(job_id, utcnow())
    store.complete("claim-1", utcnow(), done=[job_id])
    assert _status(store, job_id) is Status.CANCELLED
    assert store.retry(utcnow(), job_id) == 1
    now = utcnow()
    assert [
        job.id for job in store.claim("claim-2", 10, ["slow"], now, now + timedelta(seconds=30))
    ] == [job_id]
    assert store.renew("claim-2", now + timedelta(seconds=60)).cancelled == frozenset()
    store.complete("claim-2", utcnow(), done=[job_id])
    assert _status(store, job_id) is Status.DONE


def test_a_failure_or_a_release_after_the_request_ends_cancelled_too(engine: Engine) -> None:
    store, failed = _claimed(engine)
    store.request_cancel(failed, utcnow())
    retry = Failure(failed, False, utcnow(), "boom", [])
    store.complete("claim-1", utcnow(), failures=[retry])  # would have been retried
    job = store.get(failed)
    assert job is not None and job.status is Status.CANCELLED and job.finished_at is not None
    store, released = _claimed(engine, kind="other")
    store.request_cancel(released, utcnow())
    store.complete("claim-1", utcnow(), released=[released])
    assert _status(store, released) is Status.CANCELLED


def test_a_lapsed_lease_is_cancelled_at_once_and_by_cleanup(engine: Engine) -> None:
    store, lapsed = _claimed(engine, lease=-1)  # its holder is gone
    assert store.request_cancel(lapsed, utcnow()) is CancelOutcome.CANCELLED
    store, dying = _claimed(engine, kind="other", lease=0.5)
    assert store.request_cancel(dying, utcnow()) is CancelOutcome.REQUESTED
    time.sleep(0.6)  # then its holder died: no heartbeat
    assert store.end_lapsed_cancels(utcnow()) == 1
    assert _status(store, dying) is Status.CANCELLED
    assert store.end_lapsed_cancels(utcnow()) == 0


def test_a_python_handler_sees_the_cancel_at_its_heartbeat(
    engine: Engine, database_url: str
) -> None:
    """A handler loops on ``context.heartbeat()``; an operator cancels it from another thread;
    it raises ``JobCancelled`` within about a lease, and the job ends cancelled, never retried
    (a second sweep finds nothing)."""
    started, seen = threading.Event(), []
    registry = Registry()

    @registry.job_kind("loop")
    def loop(context: JobContext, job: Job) -> Any:
        started.set()
        for _ in range(200):
            time.sleep(0.05)
            try:
                context.heartbeat()
            except JobCancelled:
                seen.append(context.cancelled)
                return "finished anyway"  # returning normally still ends it cancelled
        return "never cancelled"

    settings = Settings.of(database_url=database_url, local_mode=True, job_lease_seconds=1)
    job_id = JobStore(engine).enqueue(NewJob("loop", {}), allow_unknown=True).job_id
    assert job_id is not None
    sweeper = Sweeper(settings, engine, registry.job_kinds)
    runner = threading.Thread(target=lambda: sweeper.run(time.monotonic() + 20))
    runner.start()
    assert started.wait(10)
    asked = time.monotonic()
    assert JobStore(engine).request_cancel(job_id, utcnow()) is CancelOutcome.REQUESTED
    runner.join(20)
    assert seen == [True] and time.monotonic() - asked < 3
    store = JobStore(engine)
    assert _status(store, job_id) is Status.CANCELLED
    again = Sweeper(settings, engine, registry.job_kinds).run(time.monotonic() + 5)
    assert again.claimed == 0
