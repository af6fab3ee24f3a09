"""Debounce on SQLite and PostgreSQL: enqueues with one debounce key inside its quiet window are
one job, which runs once the window is quiet (or at the longest wait) with the latest payload;
10 bursts of 100 enqueues, swept by threads running the real ``Sweeper`` meanwhile, are 10 runs,
each with its burst's last payload."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import Engine, func, select

from consumer import NewJob, enqueue, enqueue_many
from consumer.config.settings import Settings
from consumer.jobs.model import Debounce, InvalidJob
from consumer.jobs.schema import jobs
from consumer.jobs.store import JobStore
from consumer.jobs.sweep import Sweeper
from consumer.wire.timeutil import utcnow
from tests.jobs.test_flow import Recorder, kinds_of

KIND = "call"


def test_a_debounce_is_checked() -> None:
    for quiet, longest in ((0, 1), (2, 1), (1, 100_000)):
        with pytest.raises(InvalidJob, match="a debounce needs 0 < quiet <= max_wait"):
            Debounce("k", quiet, longest)
    with pytest.raises(InvalidJob, match="takes no idempotency key"):
        NewJob(KIND, {}, key="x", debounce=Debounce("k", 1, 2))


def test_enqueues_in_the_quiet_window_are_one_job_with_the_latest_payload(engine: Engine) -> None:
    debounce = Debounce("user-7", quiet=30, max_wait=3600)
    ids = {enqueue(engine, KIND, {"n": n}, allow_unknown=True, debounce=debounce).job_id
           for n in range(5)}  # fmt: skip
    [job] = JobStore(engine).list(limit=10)
    assert ids == {job.id} and job.payload == {"n": 4}
    assert timedelta(seconds=29) < job.run_at - utcnow() <= timedelta(seconds=30)
    with pytest.raises(InvalidJob, match="one at a time"), engine.begin() as connection:
        enqueue_many(connection, [NewJob(KIND, {}, debounce=debounce)], allow_unknown=True)


def test_the_longest_wait_bounds_a_job_that_keeps_being_put_off(engine: Engine) -> None:
    first = utcnow()
    debounce = Debounce("user-8", quiet=30, max_wait=31)
    enqueue(engine, KIND, {"n": 0}, allow_unknown=True, debounce=debounce)
    time.sleep(1.2)
    enqueue(engine, KIND, {"n": 1}, allow_unknown=True, debounce=debounce)
    [job] = JobStore(engine).list(limit=10)
    assert job.payload == {"n": 1}
    assert job.run_at - first <= timedelta(seconds=31.1), "put off past its longest wait"


def runs(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).where(jobs.c.status == "done")).scalar())


@pytest.mark.slow  # 10 quiet windows of 1.5 s, long enough for a loaded machine's enqueues
def test_10_bursts_of_100_enqueues_are_10_runs_each_with_its_last_payload(
    engine: Engine, job_settings: Settings
) -> None:
    recorder = Recorder()
    stop = threading.Event()

    def sweep() -> None:
        while not stop.is_set():
            Sweeper(job_settings, engine, kinds_of(recorder)).run(time.monotonic() + 2)
            time.sleep(0.02)

    sweepers = [threading.Thread(target=sweep) for _ in range(3)]
    for thread in sweepers:
        thread.start()
    try:
        for burst in range(10):
            debounce = Debounce("account-1", quiet=1.5, max_wait=30)
            for n in range(100):
                enqueue(engine, KIND, {"burst": burst, "n": n}, kinds=[KIND], debounce=debounce)
            deadline = time.monotonic() + 15
            while runs(engine) <= burst and time.monotonic() < deadline:
                time.sleep(0.05)
    finally:
        stop.set()
        for thread in sweepers:
            thread.join()
    payloads = [job.payload for _, _, job in sorted(recorder.calls, key=lambda call: call[0])]
    assert payloads == [{"burst": burst, "n": 99} for burst in range(10)]
