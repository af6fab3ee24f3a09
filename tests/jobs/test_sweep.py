"""The sweep on SQLite and PostgreSQL: claims, priority, retries with backoff, dead jobs, cancel
and purge (leases and the budget: ``test_sweep_leases``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from sqlalchemy import Engine, update

from consumer import enqueue
from consumer.config.settings import Settings
from consumer.jobs.model import Status
from consumer.jobs.schema import jobs
from consumer.jobs.store import JobStore
from consumer.pipeline.extensions import JobKinds
from consumer.wire.timeutil import utcnow
from tests.conftest import Clock
from tests.jobs.conftest import add, statuses, sweep
from tests.jobs.kinds_plugin import run_counts

RUNS = ["record"]
"""The kinds the sweeps of these tests run (``tests.jobs.kinds_plugin``)."""


def test_due_jobs_run_once_and_are_done(
    runs_engine: Engine, job_settings: Settings, kinds: JobKinds
) -> None:
    ids = add(runs_engine, 45)
    summary = sweep(job_settings, runs_engine, kinds)
    assert (summary.claimed, summary.done, summary.lost, summary.still_due) == (45, 45, 0, 0)
    assert summary.batches == 3  # the first batch of 10 measures the pace, then 20, 15
    assert run_counts(runs_engine) == {job_id: 1 for job_id in ids}
    assert set(statuses(runs_engine).values()) == {"done"}
    again = sweep(job_settings, runs_engine, kinds)
    assert (again.claimed, again.done) == (0, 0)
    assert run_counts(runs_engine) == {job_id: 1 for job_id in ids}


def test_future_and_unknown_kind_jobs_are_left_pending(
    runs_engine: Engine, job_settings: Settings, kinds: JobKinds
) -> None:
    later = enqueue(
        runs_engine, "record", {}, run_at=utcnow() + timedelta(hours=1), kinds=RUNS
    ).job_id
    unknown = enqueue(runs_engine, "not-registered-here", {}, allow_unknown=True).job_id
    summary = sweep(job_settings, runs_engine, kinds)
    assert summary.claimed == 0
    assert summary.still_due == 1  # the unknown kind is due; another sweeper may know it
    assert summary.unknown_kinds == {"not-registered-here": 1}
    assert summary.stopped == "unknown_kinds"  # not "drained": a due job is waiting
    assert statuses(runs_engine) == {later: "pending", unknown: "pending"}


def test_a_claim_returns_the_job_as_enqueued_with_utc_datetimes(
    runs_engine: Engine, kinds: JobKinds
) -> None:
    """On PostgreSQL the claim bypasses SQLAlchemy's result types: its datetimes must still come
    back in UTC whatever the session's time zone, and equal to what the other queries read."""
    run_at = datetime(2020, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=2)))
    payload = {"to": "a@example.com", "n": [1, 2.5, None]}
    job_id = enqueue(
        runs_engine, "record", payload, key="k", run_at=run_at, priority=-3, kinds=RUNS
    ).job_id
    store, now = JobStore(runs_engine), utcnow()
    with runs_engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql("SET LOCAL TIME ZONE 'Asia/Tokyo'")
        (claimed,) = store.claim(
            "t", 5, ["record"], now, now + timedelta(60), connection=connection
        )
    stored = store.get(job_id or 0)
    assert stored is not None
    assert claimed == stored._replace(
        status=Status.RUNNING, last_error=None, lease_until=None, updated_at=None, errors=()
    )
    assert (claimed.run_at, claimed.payload, claimed.priority) == (run_at, payload, -3)
    assert claimed.run_at.tzinfo is UTC and claimed.created_at.tzinfo is UTC
    assert (claimed.attempts, claimed.idempotency_key, claimed.max_attempts) == (1, "k", None)


def test_higher_priority_runs_first(
    runs_engine: Engine, job_settings: Settings, kinds: JobKinds
) -> None:
    low = [enqueue(runs_engine, "record", {}, kinds=RUNS).job_id for _ in range(3)]
    high = enqueue(runs_engine, "record", {}, priority=5, kinds=RUNS).job_id
    with runs_engine.begin() as connection:
        claimed = JobStore(connection.engine).claim(
            "t", 2, ["record"], utcnow(), utcnow() + timedelta(60), connection=connection
        )
    assert [job.id for job in claimed] == [high, low[0]]


def test_failing_kind_backs_off_then_dies_with_its_history_and_retry_revives_it(
    runs_engine: Engine, job_settings: Settings, kinds: JobKinds, clock: Clock
) -> None:
    (job_id,) = add(runs_engine, 1, fail="always")
    run_ats = []
    for attempt in (1, 2, 3):
        summary = sweep(job_settings, runs_engine, kinds, clock)
        job = JobStore(runs_engine).get(job_id)
        assert job is not None and job.attempts == attempt
        assert [entry["attempt"] for entry in job.errors] == list(range(1, attempt + 1))
        assert "Flaky: attempt" in (job.last_error or "")
        if attempt < 3:
            assert (summary.retried, job.status) == (1, Status.PENDING)
            run_ats.append(job.run_at)
            delay = (job.run_at - clock()).total_seconds()
            base = 10 * 2 ** (attempt - 1)
            assert base / 2 - 1 <= delay <= base  # equal jitter: [d/2, d]
            assert sweep(job_settings, runs_engine, kinds, clock).claimed == 0  # not yet due
            clock.advance(delay + 1)
        else:
            assert (summary.dead, job.status, job.finished_at is not None) == (1, "dead", True)
    assert run_ats[0] < run_ats[1]
    assert sweep(job_settings, runs_engine, kinds, clock).claimed == 0  # dead stays dead

    assert JobStore(runs_engine).retry(clock(), job_id) == 1
    revived = JobStore(runs_engine).get(job_id)
    assert revived is not None and (revived.status, revived.attempts) == ("pending", 0)
    assert len(revived.errors) == 3  # the history is kept
    with runs_engine.begin() as connection:  # the cause is fixed
        connection.execute(update(jobs).values(payload={}))
    assert sweep(job_settings, runs_engine, kinds, clock).done == 1
    assert run_counts(runs_engine) == {job_id: 1}


def test_permanent_failure_is_dead_at_once(
    runs_engine: Engine, job_settings: Settings, kinds: JobKinds
) -> None:
    (job_id,) = add(runs_engine, 1, fail="permanent")
    assert sweep(job_settings, runs_engine, kinds).dead == 1
    job = JobStore(runs_engine).get(job_id)
    assert job is not None and (job.status, job.attempts) == ("dead", 1)
    assert job.errors[0]["error"] == "Permanent: the test said so"


def test_a_job_recovers_after_transient_failures(
    runs_engine: Engine, job_settings: Settings, kinds: JobKinds, clock: Clock
) -> None:
    (job_id,) = add(runs_engine, 1, fail="until:3")
    for _ in range(3):
        sweep(job_settings, runs_engine, kinds, clock)
        clock.advance(100)
    job = JobStore(runs_engine).get(job_id)
    assert job is not None and (job.status, job.attempts, len(job.errors)) == ("done", 3, 2)


def test_retry_dead_revives_every_dead_job(
    runs_engine: Engine, job_settings: Settings, kinds: JobKinds
) -> None:
    add(runs_engine, 3, fail="permanent")
    add(runs_engine, 1)
    sweep(job_settings, runs_engine, kinds)
    assert JobStore(runs_engine).retry(utcnow()) == 3
    assert sorted(statuses(runs_engine).values()) == ["done", "pending", "pending", "pending"]


def test_cancel_only_pending_jobs(
    runs_engine: Engine, job_settings: Settings, kinds: JobKinds
) -> None:
    pending, done = add(runs_engine, 2)
    with runs_engine.begin() as connection:
        JobStore(connection.engine).claim(
            "t", 1, ["record"], utcnow(), utcnow() + timedelta(seconds=60), connection=connection
        )
    assert not JobStore(runs_engine).cancel(pending, utcnow())  # running now
    with runs_engine.begin() as connection:
        JobStore(connection.engine).complete("t", utcnow(), done=[pending], connection=connection)
    assert JobStore(runs_engine).cancel(done, utcnow())
    assert not JobStore(runs_engine).cancel(done, utcnow())
    assert sweep(job_settings, runs_engine, kinds).claimed == 0
    assert JobStore(runs_engine).retry(utcnow(), done) == 1  # a cancelled job can be revived
    assert sweep(job_settings, runs_engine, kinds).done == 1


def test_purge_removes_only_finished_jobs_past_retention(runs_engine: Engine) -> None:
    old_done, old_pending, new_done = add(runs_engine, 3)
    long_ago = utcnow() - timedelta(days=30)
    with runs_engine.begin() as connection:
        for job_id, status, finished in (
            (old_done, "done", long_ago),
            (old_pending, "pending", None),
            (new_done, "done", utcnow()),
        ):
            connection.execute(
                update(jobs)
                .where(jobs.c.id == job_id)
                .values(status=status, finished_at=finished, idempotency_key=f"k{job_id}")
            )
    assert JobStore(runs_engine).purge(finished_before=utcnow() - timedelta(days=7)) == 1
    assert set(statuses(runs_engine)) == {old_pending, new_done}
    assert enqueue(
        runs_engine, "record", {}, key=f"k{old_done}", allow_unknown=True, kinds=RUNS
    ).inserted
