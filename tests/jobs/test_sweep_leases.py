"""The sweep's leases and budget on SQLite and PostgreSQL: an expired or unrenewed lease is taken
over and its old owner cannot write, the heartbeat keeps a long batch, the budget stops a sweep,
concurrent sweeps run each job once."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import Engine, select

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.jobs.lease import LeaseKeeper
from consumer.jobs.schema import jobs
from consumer.jobs.store import JobStore
from consumer.pipeline.extensions import JobKinds
from consumer.wire.timeutil import utcnow
from tests.conftest import Clock, free_port
from tests.jobs.conftest import add, statuses, sweep
from tests.jobs.kinds_plugin import run_counts


def test_an_expired_lease_is_taken_over_and_the_old_owner_cannot_write(
    runs_engine: Engine, job_settings: Settings, kinds: JobKinds, clock: Clock
) -> None:
    ids = add(runs_engine, 3)
    now = clock()
    with runs_engine.begin() as connection:
        crashed = JobStore(connection.engine).claim(
            "crashed", 10, ["record"], now, now + timedelta(seconds=5), connection=connection
        )
    assert len(crashed) == 3
    assert sweep(job_settings, runs_engine, kinds, clock).claimed == 0  # lease still live
    clock.advance(6)
    summary = sweep(job_settings, runs_engine, kinds, clock)
    assert (summary.claimed, summary.done) == (3, 3)
    with runs_engine.begin() as connection:
        written = JobStore(connection.engine).complete(
            "crashed", clock(), done=ids, released=ids, connection=connection
        )
    assert written.total == 0  # zero rows: the lease was lost, nothing is overwritten
    for job_id in ids:
        job = JobStore(runs_engine).get(job_id)
        assert job is not None and (job.status, job.attempts) == ("done", 2)


def test_a_job_whose_sweepers_keep_dying_ends_dead(
    runs_engine: Engine, job_settings: Settings, kinds: JobKinds, clock: Clock
) -> None:
    (job_id,) = add(runs_engine, 1)
    for _ in range(job_settings.jobs.max_attempts):
        now = clock()
        with runs_engine.begin() as connection:
            assert JobStore(connection.engine).claim(
                "dies", 1, ["record"], now, now + timedelta(seconds=1), connection=connection
            )
        clock.advance(2)
    summary = sweep(job_settings, runs_engine, kinds, clock)
    job = JobStore(runs_engine).get(job_id)
    assert summary.dead == 1 and job is not None and job.status == "dead"
    assert "attempts exhausted" in (job.last_error or "")
    assert run_counts(runs_engine) == {}


def test_the_budget_stops_the_sweep_and_reports_what_remains(
    runs_engine: Engine, job_settings: Settings, kinds: JobKinds
) -> None:
    add(runs_engine, 40, sleep=0.1)
    started = time.monotonic()
    summary = sweep(job_settings, runs_engine, kinds, budget=1.5)
    elapsed = time.monotonic() - started
    assert elapsed < 1.5, "the sweep outlived its budget"
    assert summary.stopped == "budget" and summary.budget_left > 0
    assert 5 <= summary.done <= 15
    assert summary.still_due == 40 - summary.done
    counts = statuses(runs_engine)
    assert list(counts.values()).count("pending") == 40 - summary.done  # nothing left running
    with runs_engine.connect() as connection:
        attempts = connection.execute(
            select(jobs.c.attempts).where(jobs.c.status == "pending")
        ).scalars()
        assert set(attempts) == {0}  # a released claim is not an attempt


def test_an_exhausted_budget_claims_nothing(
    runs_engine: Engine, job_settings: Settings, kinds: JobKinds
) -> None:
    add(runs_engine, 5)
    summary = sweep(job_settings, runs_engine, kinds, budget=0.01)
    assert (summary.claimed, summary.stopped, summary.still_due) == (0, "budget", 5)


def test_concurrent_sweeps_in_threads_run_each_job_once(
    runs_engine: Engine, job_settings: Settings, kinds: JobKinds
) -> None:
    ids = add(runs_engine, 300)
    summaries = []

    def work() -> None:
        summaries.append(sweep(job_settings, runs_engine, kinds))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert run_counts(runs_engine) == {job_id: 1 for job_id in ids}
    assert sum(s.done for s in summaries) == 300 and sum(s.lost for s in summaries) == 0
    assert sum(s.claimed > 0 for s in summaries) >= 2, "the sweeps did not overlap"


@pytest.mark.slow
def test_a_batch_that_outlasts_its_lease_is_kept_by_the_heartbeat(
    runs_engine: Engine, job_settings: Settings, kinds: JobKinds
) -> None:
    ids = add(runs_engine, 2, sleep=2.3)  # each job alone outlasts the 2 s lease
    settings = job_settings.with_values(job_lease_seconds=2)
    rivals: list[int] = []
    finished = threading.Event()

    def rival() -> None:  # keeps trying to take the batch over while it runs
        time.sleep(0.5)  # after the sweep under test has claimed both jobs
        while not finished.is_set():
            rivals.append(sweep(settings, runs_engine, kinds, budget=1).claimed)
            time.sleep(0.2)

    thread = threading.Thread(target=rival)
    thread.start()
    try:
        summary = sweep(settings, runs_engine, kinds, budget=20)
    finally:
        finished.set()
        thread.join()
    assert (summary.done, summary.lost, summary.stopped) == (2, 0, "drained")
    assert len(rivals) >= 5 and sum(rivals) == 0, rivals
    assert run_counts(runs_engine) == {job_id: 1 for job_id in ids}


def test_an_unrenewed_lease_is_taken_over_within_the_lease(
    runs_engine: Engine, job_settings: Settings, kinds: JobKinds
) -> None:
    """A sweeper that died holds its batch for one short lease, not for the ack deadline."""
    ids = add(runs_engine, 5)
    now = utcnow()
    with runs_engine.begin() as connection:
        claimed = JobStore(connection.engine).claim(
            "dead", 5, ["record"], now, now + timedelta(seconds=2), connection=connection
        )
    assert len(claimed) == 5
    assert sweep(job_settings, runs_engine, kinds).claimed == 0
    time.sleep(2.1)
    summary = sweep(job_settings, runs_engine, kinds)
    assert (summary.claimed, summary.done) == (5, 5)
    assert run_counts(runs_engine) == {job_id: 1 for job_id in ids}
    with runs_engine.begin() as connection:
        assert (
            JobStore(connection.engine)
            .renew("dead", utcnow() + timedelta(seconds=10), connection=connection)
            .count
            == 0
        )


def test_a_stale_lease_is_renewed_on_demand_and_refused_when_the_database_is_gone(
    runs_engine: Engine, database_url: str
) -> None:
    """The sweep starts a job only while its lease is known to be held: a heartbeat that fell
    behind is caught up from the sweep's thread; a database it cannot reach stops the jobs."""
    add(runs_engine, 2)
    now = utcnow()
    with runs_engine.begin() as connection:
        assert len(
            JobStore(connection.engine).claim(
                "t", 2, ["record"], now, now + timedelta(seconds=3), connection=connection
            )
        )
    keeper = LeaseKeeper(runs_engine, 3, utcnow)
    keeper.hold("t", claimed_at=time.monotonic() - 2.5)  # the heartbeat is 2.5 s late
    assert not keeper.fresh()
    assert keeper.ensure_fresh(time.monotonic()) and keeper.fresh()
    with runs_engine.connect() as connection:
        leases = connection.execute(select(jobs.c.lease_until)).scalars().all()
    assert all(lease > now + timedelta(seconds=3) for lease in leases)  # pushed forward

    if not database_url.startswith("postgresql"):
        return
    gone = make_engine(database_url.replace("127.0.0.1:5432", f"127.0.0.1:{free_port()}"))
    unreachable = LeaseKeeper(gone, 3, utcnow)
    unreachable.hold("t", claimed_at=time.monotonic() - 2.5)
    assert not unreachable.ensure_fresh(time.monotonic())
    gone.dispose()
