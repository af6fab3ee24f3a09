"""Debounce on SQLite and PostgreSQL: enqueues with one debounce key inside its quiet window are
one job, which runs once the window is quiet (or at the longest wait) with the latest payload;
10 bursts of 100 enqueues, swept by threads running the real ``Sweeper`` meanwhile, are 10 runs,
each with its burst's last payload."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

import pytest
from sqlalchemy import Engine, func, select

from consumer import NewJob, enqueue, enqueue_many
from consumer.config.settings import Settings
from consumer.errors import SettingsError
from consumer.jobs.model import Debounce, InvalidJob
from consumer.jobs.schema import jobs
from consumer.jobs.store import JobStore
from consumer.jobs.sweep import Sweeper
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.registry import Registry
from consumer.plugins import build_registry
from consumer.wire.message import PushMessage
from consumer.wire.outcomes import Kind
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


def test_a_kind_declares_its_debounce_and_the_jobs_topic_asks_for_it(
    engine: Engine, settings: Settings
) -> None:
    settings = settings.with_values(plugins=("tests.jobs.kinds_plugin",))
    registry = build_registry(settings)
    registry.job_limit("record", debounce="30s/1m")
    dispatcher = Dispatcher(settings, engine, registry)
    for n in range(3):
        attributes = {"job_kind": "record", "job_debounce_key": "acct-1"}
        message = PushMessage(f"m{n}", utcnow(), data=json.dumps({"n": n}).encode(),
                              subscription="projects/p/subs/s", attributes=attributes)  # fmt: skip
        assert dispatcher.dispatch(message).kind is Kind.DONE
    [job] = JobStore(engine).list(limit=10)
    assert (job.payload, job.debounce_key) == ({"n": 2}, "topic:acct-1")
    undeclared = PushMessage("m9", utcnow(), data=b"{}", subscription="projects/p/subs/s",
                             attributes={"job_kind": "email", "job_debounce_key": "a"})  # fmt: skip
    refused = dispatcher.dispatch(undeclared)
    assert refused.kind is Kind.DEAD and "declares no debounce" in refused.details["error"]


@pytest.mark.parametrize(
    ("raw", "problem"),
    [("soon", "debounce must be QUIET/LONGEST such as 5s/1m"), ("1m/25h", "at most a day")],
)
def test_a_bad_declared_debounce_is_one_line(raw: str, problem: str) -> None:
    with pytest.raises(SettingsError, match="job kind 'x': ") as caught:
        Registry().job_limit("x", debounce=raw)
    assert problem in str(caught.value) and "\n" not in str(caught.value)
