"""A target's reports on a job it answered 202 (``consumer.jobs.reports``), on SQLite and
PostgreSQL: a heartbeat extends the claim's lease and tells the target of a cancel; a completion
records done / retry / dead once; an older claim, a finished job and an unknown one are refused;
a lapsed lease is taken over by the next claim, after which the first claim's reports are
refused. Concurrent completions: exactly one wins (hammered on both databases)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from consumer.jobs.model import NewJob, Status
from consumer.jobs.reports import (
    Completion,
    JobReports,
    NoSuchJob,
    ReportRefused,
    RetryPolicy,
)
from consumer.jobs.store import JobStore
from consumer.wire.timeutil import utcnow

POLICY = RetryPolicy(max_attempts=3, base_seconds=10, max_seconds=100)


def _held(engine: Engine, token: str = "claim-1", lease: float = 30, n: int = 1) -> list[int]:
    store = JobStore(engine)
    ids = [store.enqueue(NewJob("long", {}), allow_unknown=True).job_id for _ in range(n)]
    now = utcnow()
    claimed = store.claim(token, n, ["long"], now, now + timedelta(seconds=lease))
    assert sorted(job.id for job in claimed) == sorted(ids)
    return [i for i in ids if i is not None]


def _job(engine: Engine, job_id: int) -> Any:
    job = JobStore(engine).get(job_id)
    assert job is not None
    return job


def test_a_heartbeat_extends_the_lease_and_reports_a_cancel(engine: Engine) -> None:
    (job_id,) = _held(engine, lease=2)
    reports = JobReports(engine)
    before = _job(engine, job_id).lease_until
    assert reports.heartbeat(job_id, "claim-1", utcnow(), 60) is Status.RUNNING
    assert _job(engine, job_id).lease_until > before + timedelta(seconds=50)
    assert reports.heartbeat(job_id, "claim-1", utcnow(), 1) is Status.RUNNING  # never shortens
    assert _job(engine, job_id).lease_until > before + timedelta(seconds=50)
    JobStore(engine).request_cancel(job_id, utcnow())
    assert reports.heartbeat(job_id, "claim-1", utcnow(), 60) is Status.CANCELLED
    assert _job(engine, job_id).status is Status.CANCELLED
    with pytest.raises(ReportRefused, match="not running"):
        reports.complete(job_id, "claim-1", Completion("done"), utcnow(), POLICY)


def test_each_completion(engine: Engine) -> None:
    done, retry, dead = _held(engine, n=3)
    reports = JobReports(engine)
    result = {"rows": 12, "nested": {"ok": True}}
    assert reports.complete(done, "claim-1", Completion("done", result), utcnow(), POLICY) is (
        Status.DONE
    )
    job = _job(engine, done)
    assert job.result == result and job.finished_at is not None and job.lease_until is None
    assert reports.complete(retry, "claim-1", Completion("retry", None, "busy"), utcnow(),
                            POLICY) is Status.PENDING  # fmt: skip
    job = _job(engine, retry)
    assert job.run_at > utcnow() and job.last_error == "busy" and job.errors[-1]["error"] == "busy"
    assert reports.complete(dead, "claim-1", Completion("dead", None, "bad input"), utcnow(),
                            POLICY) is Status.DEAD  # fmt: skip
    assert _job(engine, dead).last_error == "bad input"


def test_refusals(engine: Engine) -> None:
    (job_id,) = _held(engine)
    reports = JobReports(engine)
    with pytest.raises(ReportRefused, match="no longer under this claim"):
        reports.heartbeat(job_id, "claim-0", utcnow(), 30)
    with pytest.raises(ReportRefused, match="no longer under this claim"):
        reports.complete(job_id, "claim-0", Completion("done"), utcnow(), POLICY)
    with pytest.raises(NoSuchJob):
        reports.heartbeat(10**9, "claim-1", utcnow(), 30)
    with pytest.raises(NoSuchJob):
        reports.complete(10**9, "claim-1", Completion("done"), utcnow(), POLICY)
    assert _job(engine, job_id).status is Status.RUNNING  # nothing changed


def test_a_lapsed_lease_is_retried_under_a_new_claim_and_the_old_one_refused(
    engine: Engine,
) -> None:
    (job_id,) = _held(engine, lease=-1)  # no heartbeat came: the lease lapsed
    now = utcnow()
    again = JobStore(engine).claim("claim-2", 5, ["long"], now, now + timedelta(seconds=30))
    assert [job.id for job in again] == [job_id] and again[0].attempts == 2
    reports = JobReports(engine)
    with pytest.raises(ReportRefused, match="no longer under this claim"):
        reports.complete(job_id, "claim-1", Completion("done"), utcnow(), POLICY)
    assert reports.complete(job_id, "claim-2", Completion("done"), utcnow(), POLICY) is (
        Status.DONE
    )


def test_concurrent_completions_one_wins(engine: Engine) -> None:
    """Eight threads complete each of 20 jobs at once: one completion per job is recorded, the
    others are refused (409), on both databases."""
    ids = _held(engine, n=20)
    reports = JobReports(engine)
    wins: list[int] = []
    refused: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def complete(worker: int) -> None:
        start.wait()
        for job_id in ids:
            completion = Completion("done", {"worker": worker})
            try:
                reports.complete(job_id, "claim-1", completion, utcnow(), POLICY)
            except ReportRefused:
                with lock:
                    refused.append(job_id)
            else:
                with lock:
                    wins.append(job_id)

    threads = [threading.Thread(target=complete, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(wins) == sorted(ids)  # each job exactly once
    assert len(refused) == 7 * len(ids)
    assert all(_job(engine, job_id).status is Status.DONE for job_id in ids)
