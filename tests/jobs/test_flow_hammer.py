"""Flow control proven by hammering, on PostgreSQL: three sweeping processes of eight threads
each (``tests.jobs.flow_runner``, the real sweep task and claim) work off jobs of a job-kind
HTTP target (``CONSUMER_HTTP_TARGETS``) against a real HTTP server in its own process
(``tests.jobs.flow_server``), which records how many requests it holds at once and when each
arrives."""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from sqlalchemy import Engine, func, select

from consumer import NewJob, enqueue_many
from consumer.db.engine import make_engine
from consumer.jobs.schema import jobs
from tests.conftest import stop_process

# Rates are measured as arrivals at the server: other tests' load on the machine delays some
# starts into the next second's window, so these run alone (scripts/test's serial phase).
pytestmark = [pytest.mark.slow, pytest.mark.serial]
PROCESSES, THREADS = 3, 8
RUNNER = [sys.executable, "-m", "tests.jobs.flow_runner", "--threads", str(THREADS)]
KIND = "call"


@pytest.fixture
def db(postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_url)
    yield engine
    engine.dispose()


@pytest.fixture
def serve() -> Iterator[Callable[[float], str]]:
    """Start the recording server holding each request ``hold`` seconds; its URL."""
    started: list[subprocess.Popen[str]] = []

    def start(hold: float) -> str:
        command = [sys.executable, "-m", "tests.jobs.flow_server", "--hold", str(hold)]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        started.append(process)
        assert process.stdout is not None
        return f"http://127.0.0.1:{int(process.stdout.readline())}"

    yield start
    for process in started:
        stop_process(process)
        if process.stdout is not None:
            process.stdout.close()


def target_env(url: str, server: str, **limits: Any) -> dict[str, str]:
    target = {
        "name": "calls", "url": f"{server}/job", "serves": {"job_kind": KIND},
        "auth": {"type": "none"}, "concurrency": THREADS, **limits,
    }  # fmt: skip
    return {
        "CONSUMER_DATABASE_URL": url,
        "CONSUMER_LOCAL_MODE": "true",
        "CONSUMER_LOG_LEVEL": "ERROR",
        "CONSUMER_HTTP_TARGETS": json.dumps([target]),
        "CONSUMER_SWEEP_BATCH_SIZE": "20",
        # A target job started in the sweep's last half second fails unsent ("no time left"):
        # retried at once, so the run is not held up by a backoff.
        "CONSUMER_JOB_RETRY_BASE_SECONDS": "0",
    }


def run(env: dict[str, str], seconds: float = 40) -> list[dict[str, Any]]:
    """The sweeping processes, started together, to the end."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("CONSUMER_")}
    command = [*RUNNER, "--seconds", str(seconds)]
    processes = [
        subprocess.Popen(command, env={**inherited, **env}, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(PROCESSES)
    ]  # fmt: skip
    results = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=seconds + 30)
            assert process.returncode == 0, err[-2000:]
            results.append(json.loads(out.splitlines()[-1]))
    finally:
        for process in processes:
            stop_process(process)
    return results


def add(engine: Engine, new_jobs: list[NewJob]) -> None:
    with engine.begin() as connection:
        enqueue_many(connection, new_jobs, kinds=[KIND])


def log_of(server: str) -> dict[str, Any]:
    return dict(requests.get(f"{server}/_log", timeout=10).json())


def statuses(engine: Engine) -> dict[str, int]:
    query = select(jobs.c.status, func.count()).group_by(jobs.c.status)
    with engine.connect() as connection:
        return {str(status): int(n) for status, n in connection.execute(query)}


def assert_each_job_called_once(log: dict[str, Any], count: int) -> None:
    ids = [call["id"] for call in log["calls"]]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == count


def test_a_cap_of_2_is_reached_and_never_exceeded(
    postgres_url: str, db: Engine, serve: Callable[[float], str]
) -> None:
    server = serve(0.1)
    add(db, [NewJob(KIND, {"n": n}) for n in range(60)])
    results = run(target_env(postgres_url, server, cap=2))
    log = log_of(server)
    print("cap 2: max held", log["max_held"], results)
    assert log["max_held"] == 2, "the cap was exceeded (> 2) or never reached (< 2)"
    assert_each_job_called_once(log, 60)
    assert statuses(db) == {"done": 60}


def windows(starts: list[float], width: float = 1.0) -> list[int]:
    """Arrivals in every ``width``-second window that begins at an arrival and ends before the
    last one (the sliding windows wholly inside the run)."""
    starts = sorted(starts)
    counts, end = [], 0
    for begin, at in enumerate(starts):
        if at + width > starts[-1]:
            break
        while end < len(starts) and starts[end] < at + width:
            end += 1
        counts.append(end - begin)
    return counts


def test_a_rate_of_50_per_second_holds_in_every_1s_window_and_is_reached(
    postgres_url: str, db: Engine, serve: Callable[[float], str]
) -> None:
    server = serve(0.005)
    total = 300
    add(db, [NewJob(KIND, {"n": n}) for n in range(total)])
    run(target_env(postgres_url, server, rate="50/1s"))
    log = log_of(server)
    starts = sorted(call["start"] for call in log["calls"])
    counts = windows(starts)
    mean = (len(starts) - 1) / (starts[-1] - starts[0])
    typical = statistics.median(counts)
    print(f"rate 50/s: 1 s windows worst {max(counts)}, median {typical}, least {min(counts)};"
          f" mean {mean:.1f}/s over the run")  # fmt: skip
    assert_each_job_called_once(log, total)
    assert max(counts) <= 55, f"a 1 s window held {max(counts)} starts (limit 50 + 10%)"
    # Reached in most windows after the first second (sweepers starting): a stall of this shared
    # machine lowers the windows that overlap it (the group rate's median, the same statistic,
    # once fell to 25 in CI), while a limiter that throttles too hard lowers all of them.
    steady = windows([start for start in starts if start >= starts[0] + 1.0])
    reached = statistics.quantiles(steady, n=4)[2]
    assert reached >= 45, f"the rate was not reached: upper quartile of 1 s windows {reached}"
    assert statuses(db) == {"done": total}


def test_a_lock_keys_jobs_run_in_enqueue_order_one_at_a_time_while_keys_overlap(
    postgres_url: str, db: Engine, serve: Callable[[float], str]
) -> None:
    server = serve(0.02)
    keys, per_key = 5, 16
    new_jobs = [NewJob(KIND, {"key": f"k{k}", "seq": n}, lock_key=f"k{k}")
                for n in range(per_key) for k in range(keys)]  # fmt: skip
    new_jobs += [NewJob(KIND, {"key": None, "seq": n}) for n in range(30)]
    add(db, new_jobs)
    run(target_env(postgres_url, server))
    log = log_of(server)
    assert_each_job_called_once(log, len(new_jobs))
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for call in sorted(log["calls"], key=lambda call: call["start"]):
        if call["payload"]["key"] is not None:
            by_key[call["payload"]["key"]].append(call)
    violations = 0
    for calls in by_key.values():
        violations += sum(
            a["payload"]["seq"] > b["payload"]["seq"] for a, b in itertools.pairwise(calls)
        )
        violations += sum(b["start"] < a["end"] for a, b in itertools.pairwise(calls))
    print("lock keys: order or overlap violations", violations, "max held", log["max_held"])
    assert violations == 0
    assert all(len(calls) == per_key for calls in by_key.values())
    assert log["max_held"] >= 3, "jobs of different keys did not run in parallel"
    assert statuses(db) == {"done": len(new_jobs)}
