"""Debounced jobs failing and retried while the jobs table's epoch moves on, on PostgreSQL:
sweepers put each failed job back to pending in its epoch while enqueues of its key, some held
open, land in later epochs, where no index sees both. A watcher never sees two pending jobs of
one debounce key: both writes take the key's advisory lock (``consumer.jobs.debounce_race``;
the two orders one at a time: ``test_epoch_keys``)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.jobs.model import Debounce, Job, NewJob
from consumer.jobs.schema import jobs
from consumer.jobs.store import JobStore
from consumer.jobs.sweep import Sweeper
from consumer.pipeline.extensions import JobKinds
from tests.jobs.epoch_hammering import HOLD, TWO_PENDING, Threads, switch_soon

pytestmark = pytest.mark.postgres
KIND = "flaky"
KEYS = 3
SWITCHES = 4
SWEEPERS = 2
PHASE_SECONDS = 0.4
"""How long the writers and sweepers work between two switches."""


class Failed(Exception):
    """Every run fails, retryably: the job goes back to pending."""


def fail(_context: Any, _job: Job) -> None:
    time.sleep(0.002)
    raise Failed("fails on purpose")


@pytest.fixture
def db(postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_url, pool_size=10)
    yield engine
    engine.dispose()


def test_debounced_retries_and_enqueues_across_switches_never_make_two_pending_jobs(
    db: Engine, postgres_url: str
) -> None:
    kinds = JobKinds()
    kinds.add(KIND, fail)
    settings = Settings.of(
        database_url=postgres_url, local_mode=True, sweep_batch_size=5,
        job_max_attempts=1000, job_retry_base_seconds=0,
    )  # fmt: skip
    store = JobStore(db)
    seen: list[str] = []
    stop = threading.Event()

    def enqueue(n: int, held: bool) -> None:
        debounce = Debounce(f"d{n % KEYS}", quiet=0.001, max_wait=0.01)
        new = NewJob(KIND, {"n": n}, debounce=debounce)
        with db.begin() as connection:
            store.enqueue(new, connection=connection, allow_unknown=True)
            time.sleep(HOLD if held else 0)

    def writer(held: bool) -> None:
        for n in itertools.count():
            if stop.is_set():
                return
            enqueue(n, held)

    def sweeper() -> None:
        while not stop.is_set():
            Sweeper(settings, db, kinds).run(time.monotonic() + 5)

    def watch() -> None:
        while not stop.is_set():
            with db.connect() as connection:
                seen.extend(connection.execute(TWO_PENDING).scalars())

    threads = Threads()
    for target in (lambda: writer(True), lambda: writer(True), lambda: writer(False)):
        threads.start(target)
    for _ in range(SWEEPERS):
        threads.start(sweeper)
    threads.start(watch)
    try:
        for _ in range(SWITCHES):
            time.sleep(PHASE_SECONDS)
            switch_soon(db, 0, HOLD)
        time.sleep(PHASE_SECONDS)
    finally:
        stop.set()
        threads.join()
    with db.connect() as connection:
        seen.extend(connection.execute(TWO_PENDING).scalars())
        retried = select(func.count()).where(jobs.c.attempts > 1)  # failed, pending, run again
        assert connection.execute(retried).scalar_one() > 0, "no job was retried"
    assert sorted(set(seen)) == []
