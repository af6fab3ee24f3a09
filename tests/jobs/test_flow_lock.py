"""How a cap holds on PostgreSQL (consumer.jobs.throttle), each part proven where it would break.

The count is taken once the kind's shards are locked: a claim that waited for the lock counts the
jobs the previous holder claimed and committed while it waited. A count from the statement's own
snapshot (taken before the wait) would miss them and exceed the cap; the hammer tests catch that
only when the timing falls badly, the first test here every time. Claims far from the cap lock
one shard each and keep room for the others' uncommitted claims: the shard hammer, with the room
scaled down to its small claims, holds the cap, and exceeds it without the room."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, func, select, text

from consumer import NewJob, enqueue_many
from consumer.config.flow import JobLimit
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.jobs import flow, flow_lock, limits
from consumer.jobs.model import Job, Status
from consumer.jobs.schema import jobs
from consumer.jobs.store import JobStore
from consumer.jobs.sweep import Sweeper
from consumer.jobs.throttle import Throttle
from consumer.wire.timeutil import utcnow
from tests.jobs.test_flow import Recorder, done_count, kinds_of

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
    is set (``locked`` is set once the claim has returned, holding the kind's shards)."""
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
    """Until a backend waits for a row lock (the second claim, on the kind's shards)."""
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
    # other TAKE jobs, then waits for the shards the first holds (near the cap: all of them).
    second = threading.Thread(target=run, args=("second", threading.Event(), commit_now))
    second.start()
    wait_for_lock_waiter(pg_engine)
    commit_first.set()  # the first commits; the second gets the shards and counts
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


SMALL_CLAIM = 1
"""Each claim takes one job of the kind in the shard hammer: sixteen sweepers, a cap of 12."""
SWEEPERS = 16
SHARDED_CAP = 12


def shard_hammer(url: str, reserve: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """``SWEEPERS`` threads sweeping 160 jobs of a kind capped at ``SHARDED_CAP``, each claim
    taking one job and keeping ``reserve`` under the cap when it holds one shard: the most jobs
    seen running at once, and how many claims locked one shard."""
    monkeypatch.setattr(limits, "CAPPED_CLAIM_MOST", SMALL_CLAIM)
    monkeypatch.setattr(flow_lock, "SHARD_RESERVE", reserve)
    cap_values = flow_lock.FlowLocks.cap_values
    picked: list[bool] = []

    def spied(self: flow_lock.FlowLocks, params: dict[str, Any], cap: int, own: int) -> Any:
        values = cap_values(self, params, cap, own)
        picked.append(values["first_shard"] == values["last_shard"])
        return values

    monkeypatch.setattr(flow_lock.FlowLocks, "cap_values", spied)
    engine = make_engine(url, pool_size=SWEEPERS + 2)
    recorder = Recorder(hold=0.05)
    with engine.begin() as connection:
        enqueue_many(connection, [NewJob("call", {}) for _ in range(160)], allow_unknown=True)
    settings = Settings.of(database_url=url, local_mode=True, sweep_batch_size=5)
    kinds = kinds_of(recorder)
    until = time.monotonic() + 30

    def work() -> None:
        while time.monotonic() < until and done_count(engine) < 160:
            cap = {"call": JobLimit(cap=SHARDED_CAP)}
            Sweeper(settings, engine, kinds, limits=cap).run(until)

    threads = [threading.Thread(target=work) for _ in range(SWEEPERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert done_count(engine) == 160
    engine.dispose()
    return recorder.max_held, sum(picked)


def test_claims_holding_one_shard_each_keep_the_cap(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    reserve = (flow.SHARDS - 1) * SMALL_CLAIM
    max_held, on_one_shard = shard_hammer(postgres_url, reserve, monkeypatch)
    assert on_one_shard > 0, "no claim took the one-shard path: the test proves nothing"
    assert max_held <= SHARDED_CAP
    assert max_held >= SHARDED_CAP - 2, "the cap was far from reached"
