"""Flow control on SQLite and PostgreSQL, in one process: caps, rates and lock keys hammered by
threads that each run the real ``Sweeper``; a throttled job is no attempt and no fan-out; an
operator's change applies at the next claim."""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, select

from consumer import NewJob, enqueue_many
from consumer.config.flow import JobLimit, Rate
from consumer.config.settings import Settings
from consumer.jobs.flow_admin import FlowAdmin
from consumer.jobs.model import Job
from consumer.jobs.schema import jobs
from consumer.jobs.sweep import Sweeper, SweepSummary
from consumer.jobs.tick import continuations_wanted
from consumer.pipeline.extensions import JobKinds
from consumer.wire.events import TickEvent
from consumer.wire.message import PushMessage
from consumer.wire.schedule import Every
from consumer.wire.timeutil import utcnow
from tests.jobs.test_flow_hammer import windows

THREADS = 4


class Recorder:
    """A job kind that holds each job ``hold`` seconds and records when it ran and how many ran
    at once."""

    def __init__(self, hold: float = 0.0) -> None:
        self.hold, self.lock = hold, threading.Lock()
        self.held = self.max_held = 0
        self.calls: list[tuple[float, float, Job]] = []

    def __call__(self, _context: Any, job: Job) -> None:
        with self.lock:
            self.held += 1
            self.max_held = max(self.max_held, self.held)
        start = time.monotonic()
        time.sleep(self.hold)
        with self.lock:
            self.held -= 1
            self.calls.append((start, time.monotonic(), job))


def kinds_of(recorder: Recorder) -> JobKinds:
    kinds = JobKinds()
    kinds.add("call", recorder)
    return kinds


def add(engine: Engine, new_jobs: list[NewJob]) -> None:
    with engine.begin() as connection:
        enqueue_many(connection, new_jobs, allow_unknown=True)


def hammer(
    engine: Engine, settings: Settings, kinds: JobKinds, limits: dict[str, JobLimit], left: int
) -> list[SweepSummary]:
    """``THREADS`` threads sweeping until ``left`` jobs are done (or 20 s have passed)."""
    summaries: list[SweepSummary] = []
    until = time.monotonic() + 20

    def work() -> None:
        while time.monotonic() < until and done_count(engine) < left:
            summaries.append(Sweeper(settings, engine, kinds, limits=limits).run(until))

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return summaries


def done_count(engine: Engine) -> int:
    with engine.connect() as connection:
        return len(connection.execute(select(jobs.c.id).where(jobs.c.status == "done")).all())


def test_a_cap_of_2_is_reached_and_never_exceeded(engine: Engine, job_settings: Settings) -> None:
    recorder = Recorder(hold=0.05)
    add(engine, [NewJob("call", {}) for _ in range(30)])
    hammer(engine, job_settings, kinds_of(recorder), {"call": JobLimit(cap=2)}, 30)
    assert recorder.max_held == 2
    assert sorted(job.id for _, _, job in recorder.calls) == list(range(1, 31))


@pytest.mark.serial  # "reached" is a rate: other tests' load on the machine slows the starts
def test_a_rate_spaces_starts_in_every_window_and_is_reached(
    engine: Engine, job_settings: Settings
) -> None:
    recorder = Recorder()
    add(engine, [NewJob("call", {}) for _ in range(45)])
    rate = JobLimit(rate=Rate(20, 1.0))
    hammer(engine, job_settings, kinds_of(recorder), {"call": rate}, 45)
    starts = sorted(start for start, _, _ in recorder.calls)
    assert len(starts) == 45
    assert max(windows(starts)) <= 22, "a 1 s window held more than 20/s + 10%"
    # Reached: the typical gap between starts is the rate's 0.05 s. A limiter that throttles
    # too hard widens every gap; a stall of a loaded machine only the few it falls in, and
    # 0.25 s of them would have pulled the run's mean rate (2.2 s of starts) under 18/s.
    typical = statistics.median(b - a for a, b in itertools.pairwise(starts))
    assert typical <= 1 / 18, f"the rate was not reached: the median gap was {typical:.4f} s"


def test_a_lock_keys_jobs_run_in_order_one_at_a_time_while_keys_overlap(
    engine: Engine, job_settings: Settings
) -> None:
    recorder = Recorder(hold=0.02)
    new_jobs = [NewJob("call", {"n": n}, lock_key=f"k{n % 3}") for n in range(24)]
    add(engine, new_jobs + [NewJob("call", {"n": None}) for _ in range(6)])
    settings = job_settings.with_values(sweep_batch_size=4)
    hammer(engine, settings, kinds_of(recorder), {}, 30)
    by_key: dict[str, list[tuple[float, float, Job]]] = {}
    for call in sorted(recorder.calls, key=lambda call: call[0]):
        if call[2].payload["n"] is not None:
            by_key.setdefault(f"k{call[2].payload['n'] % 3}", []).append(call)
    for calls in by_key.values():
        assert [job.id for _, _, job in calls] == sorted(job.id for _, _, job in calls)
        assert all(b[0] >= a[1] for a, b in itertools.pairwise(calls))
    assert len(recorder.calls) == 30 and recorder.max_held >= 2


def test_a_later_job_of_a_key_waits_for_an_earlier_one_that_is_not_due_yet(
    engine: Engine, job_settings: Settings
) -> None:
    later = utcnow() + timedelta(hours=1)
    add(engine, [NewJob("call", {}, run_at=later, lock_key="k"), NewJob("call", {}, lock_key="k")])
    add(engine, [NewJob("call", {})])
    recorder = Recorder()
    summary = Sweeper(job_settings, engine, kinds_of(recorder)).run(time.monotonic() + 5)
    assert [job.id for _, _, job in recorder.calls] == [3]
    assert summary.still_due == 1  # job 2: due, behind job 1 of its key


def tick(continuation: bool = False) -> TickEvent:
    message = PushMessage("m", utcnow(), attributes={"task": "sweep"})
    return TickEvent("sweep", utcnow(), Every(60), message, continuation=continuation)


def test_a_throttled_kind_is_no_attempt_no_error_and_no_fan_out(
    engine: Engine, job_settings: Settings
) -> None:
    recorder = Recorder()
    add(engine, [NewJob("call", {}) for _ in range(5)] + [NewJob("other", {})])
    kinds = kinds_of(recorder)
    kinds.add("other", recorder)
    sweeper = Sweeper(job_settings, engine, kinds, limits={"call": JobLimit(cap=0)})
    summary = sweeper.run(time.monotonic() + 0.5)
    assert [job.kind for _, _, job in recorder.calls] == ["other"]
    assert summary.throttled == {"call": 5} and summary.stopped == "throttled"
    with engine.connect() as connection:
        rows = connection.execute(
            select(jobs.c.status, jobs.c.attempts).where(jobs.c.kind == "call")
        )
        assert set(rows) == {("pending", 0)}
    topic = job_settings.with_values(continuation_topic="projects/p/topics/t")
    budget_spent = SweepSummary(done=10, still_due=5, throttled={"call": 5}, stopped="budget")
    assert continuations_wanted(topic, tick(), budget_spent) == 0


def test_an_operators_change_applies_at_the_next_claim(
    engine: Engine, job_settings: Settings
) -> None:
    recorder = Recorder()
    add(engine, [NewJob("call", {}) for _ in range(3)])
    admin = FlowAdmin(engine)
    assert admin.change("call", {"cap": 0}, "ops", utcnow()) == "cap:0"
    assert admin.change("call", {"rate": Rate(5, 1.0)}, "ops", utcnow()) == "cap:0;rate:5/1s"
    run: Callable[[], SweepSummary] = lambda: Sweeper(  # noqa: E731
        job_settings, engine, kinds_of(recorder), limits={"call": JobLimit(cap=5)}
    ).run(time.monotonic() + 0.4)
    assert run().throttled == {"call": 3} and not recorder.calls
    (shown,) = admin.show({"call": JobLimit(cap=5)}, ["call"], utcnow())
    assert shown.effective == JobLimit(cap=0, rate=Rate(5, 1.0)) and shown.updated_by == "ops"
    assert admin.change("call", None, "ops", utcnow()) is None
    assert run().done == 3


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("call=cap:x", "CONSUMER_JOB_LIMITS: kind 'call': cap must be a whole number, got 'x'"),
        ("call=rate:50", "CONSUMER_JOB_LIMITS: kind 'call': rate must be N/INTERVAL such as 50/1s"),
        ("call", "CONSUMER_JOB_LIMITS: expected KIND=cap:N;rate:N/INTERVAL, got 'call'"),
        ("call=cap:1;cap:2", "CONSUMER_JOB_LIMITS: kind 'call': cap is given twice"),
    ],
)
def test_bad_limits_are_refused_in_one_line(raw: str, problem: str) -> None:
    with pytest.raises(Exception, match="CONSUMER_JOB_LIMITS") as caught:
        Settings.from_env({"CONSUMER_LOCAL_MODE": "true", "CONSUMER_JOB_LIMITS": raw})
    assert str(caught.value).startswith(problem) and "\n" not in str(caught.value)
