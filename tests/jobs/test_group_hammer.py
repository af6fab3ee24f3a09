"""Groups proven by hammering, on PostgreSQL: three sweeping processes of eight threads each
(``tests.jobs.flow_runner``, the real sweep task and claim) work off jobs of a job-kind HTTP
target against the recording server (``tests.jobs.flow_server``); the kind's group limits come
from ``CONSUMER_JOB_LIMITS``. Each group's cap holds at every instant and is reached, each
group's rate holds in every 1 s window, and a job of one group enqueued behind another group's
backlog starts at once."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine

from consumer import NewJob
from tests.jobs.test_flow_hammer import (
    KIND,
    add,
    assert_each_job_called_once,
    db,
    log_of,
    run,
    serve,
    statuses,
    target_env,
    windows,
)

pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.postgres]
__all__ = ["db", "serve"]  # the fixtures, used by name


def limited(url: str, server: str, limits: str) -> dict[str, str]:
    return {**target_env(url, server), "CONSUMER_JOB_LIMITS": f"{KIND}={limits}"}


def most_at_once(calls: list[dict[str, Any]]) -> dict[str, int]:
    """The most calls of each group the server held at once (from arrivals and departures)."""
    moments: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for call in calls:
        moments[call["payload"]["g"]] += [(call["start"], 1), (call["end"], -1)]
    most = {}
    for group, changes in moments.items():
        held = peak = 0
        for _, change in sorted(changes):
            held += change
            peak = max(peak, held)
        most[group] = peak
    return most


def test_a_group_cap_of_2_holds_for_every_group_and_is_reached(
    postgres_url: str, db: Engine, serve: Callable[[float], str]
) -> None:
    server = serve(0.1)
    new_jobs = [NewJob(KIND, {"g": f"g{n % 4}", "n": n}, group=f"g{n % 4}") for n in range(80)]
    add(db, new_jobs)
    run(limited(postgres_url, server, "group_cap:2"))
    log = log_of(server)
    most = most_at_once(log["calls"])
    print("group cap 2: most at once by group", most, "max held", log["max_held"])
    assert most == {"g0": 2, "g1": 2, "g2": 2, "g3": 2}
    assert log["max_held"] > 2, "the groups did not run side by side"
    assert_each_job_called_once(log, 80)
    assert statuses(db) == {"done": 80}


def test_a_group_rate_of_50_per_second_holds_in_every_window_for_each_group(
    postgres_url: str, db: Engine, serve: Callable[[float], str]
) -> None:
    server = serve(0.005)
    per_group = 200
    add(db, [NewJob(KIND, {"g": f"g{n % 2}"}, group=f"g{n % 2}") for n in range(2 * per_group)])
    run(limited(postgres_url, server, "group_rate:50/1s"))
    log = log_of(server)
    assert_each_job_called_once(log, 2 * per_group)
    for group in ("g0", "g1"):
        starts = sorted(c["start"] for c in log["calls"] if c["payload"]["g"] == group)
        counts = windows(starts)
        typical = statistics.median(counts)
        print(f"group {group} rate 50/s: worst 1 s window {max(counts)}, median {typical}")
        assert max(counts) <= 55, f"a 1 s window of {group} held {max(counts)} (50 + 10%)"
        # Reached in most windows after the first second's burst: a stall of this shared
        # machine (CI once saw a median of 25) lowers the windows that overlap it, while a
        # limiter that throttles too hard lowers all of them.
        steady = windows([start for start in starts if start >= starts[0] + 1.0])
        reached = statistics.quantiles(steady, n=4)[2]
        assert reached >= 40, f"{group}'s rate was not reached: upper quartile {reached}"
    both = windows(sorted(c["start"] for c in log["calls"]))
    # One limit shared by both groups would hold every window to 55.
    assert max(both) > 55, f"the groups' rates were not each their own: windows {both}"


def test_a_job_of_group_b_behind_2000_of_group_a_starts_within_2_s(
    postgres_url: str, db: Engine, serve: Callable[[float], str]
) -> None:
    server = serve(0.02)
    add(db, [NewJob(KIND, {"g": "a", "n": n}, group="a") for n in range(2000)])
    add(db, [NewJob(KIND, {"g": "b", "n": 0}, group="b")])
    run(target_env(postgres_url, server), seconds=60)
    log = log_of(server)
    first = min(call["start"] for call in log["calls"])
    [b] = [call for call in log["calls"] if call["payload"]["g"] == "b"]
    last_a = max(call["start"] for call in log["calls"] if call["payload"]["g"] == "a")
    print(json.dumps({"b_after_first_start": b["start"] - first, "a_drained": last_a - first}))
    assert b["start"] - first < 2.0, f"group b's job started {b['start'] - first:.2f} s in"
    assert last_a - first > 2.0, "the backlog drained too fast to prove anything"
    assert_each_job_called_once(log, 2001)
