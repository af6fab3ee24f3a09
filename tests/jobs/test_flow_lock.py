"""The cap's count on PostgreSQL is taken once the kind's row is locked: a claim that waited for
the lock counts the jobs the previous holder claimed and committed while it waited. A count from
the statement's own snapshot (taken before the wait) would miss them and exceed the cap; the
hammer tests catch that only when the timing falls badly, this test every time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import Engine, func, select, text

from consumer import NewJob, enqueue_many
from consumer.config.flow import JobLimit
from consumer.db.engine import make_engine
from consumer.jobs import flow
from consumer.jobs.model import Job, Status
from consumer.jobs.schema import jobs
from consumer.jobs.store import JobStore
from consumer.jobs.throttle import Throttle
from consumer.wire.timeutil import utcnow

pytestmark = pytest.mark.postgres
CAP = 8
TAKE = 2
"""What one claim may take under ``CAP`` (a quarter of it)."""
HELD = CAP - TAKE
"""Jobs already running when the two claims start: room for one claim's take, not two."""


@pytest.fixture
def pg_engine(postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_url)
    with engine.begin() as connection:
        new_jobs = [NewJob("call", {"n": n}) for n in range(HELD + 2 * TAKE)]
        enqueue_many(connection, new_jobs, allow_unknown=True)
        now = utcnow()
        connection.execute(flow.ensure_row("postgresql"), {"flow_kind": "call", "now": now})
        until = now + timedelta(minutes=5)
        held = JobStore(engine).claim("earlier", HELD, ["call"], now, until, connection=connection)
        assert len(held) == HELD
    yield engine
    engine.dispose()


def claim(engine: Engine, locked: threading.Event, commit: threading.Event) -> list[Job]:
    """One sweeper's claim of up to ``TAKE`` jobs, in a transaction that commits once ``commit``
    is set (``locked`` is set once the claim has returned, holding the kind's row)."""
    throttle = Throttle(JobStore(engine), {"call": JobLimit(cap=CAP)})
    now = utcnow()
    with engine.connect() as connection, connection.begin():
        claimed = throttle.claim(
            connection, f"sweeper/{id(throttle)}", TAKE, ["call"], now, now + timedelta(minutes=5)
        )
        locked.set()
        assert commit.wait(10)
    return claimed


def wait_for_lock_waiter(engine: Engine) -> None:
    """Until a backend waits for a row lock (the second claim, on the kind's row)."""
    query = text("SELECT count(*) FROM pg_locks WHERE NOT granted")
    deadline = time.monotonic() + 10
    with engine.connect() as connection:
        while connection.execute(query).scalar_one() == 0:
            assert time.monotonic() < deadline, "the second claim never waited for the lock"
            time.sleep(0.02)
            connection.rollback()


def test_a_claim_that_waited_for_the_lock_counts_what_the_holder_committed(
    pg_engine: Engine,
) -> None:
    first_locked, commit_first, commit_now = threading.Event(), threading.Event(), threading.Event()
    commit_now.set()
    results: dict[str, list[Job]] = {}

    def run(name: str, locked: threading.Event, commit: threading.Event) -> None:
        results[name] = claim(pg_engine, locked, commit)

    first = threading.Thread(target=run, args=("first", first_locked, commit_first))
    first.start()
    assert first_locked.wait(10)
    # The second claim glances (it sees HELD running: the first has not committed), takes the
    # other TAKE jobs, then waits for the row the first holds.
    second = threading.Thread(target=run, args=("second", threading.Event(), commit_now))
    second.start()
    wait_for_lock_waiter(pg_engine)
    commit_first.set()  # the first commits; the second gets the row and counts
    first.join(10)
    second.join(10)
    assert len(results["first"]) == TAKE
    assert results["second"] == [], "the second claim kept jobs over the cap"
    by_status = select(jobs.c.status, func.count(), func.max(jobs.c.attempts)).group_by(
        jobs.c.status
    )
    with pg_engine.connect() as connection:
        counts = {row[0]: (row[1], row[2]) for row in connection.execute(by_status)}
    assert counts[Status.RUNNING.value] == (CAP, 1)
    assert counts[Status.PENDING.value] == (TAKE, 0), "a given-back job used an attempt"
