"""Group caps and rates on SQLite and PostgreSQL, in one process: threads that each run the real
``Sweeper`` work off jobs of many groups; each group's cap holds at every instant and is reached,
each group's rate holds in every 1 s window, a group held back does not hold the others back,
and a bad group limit is refused in one line."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import pytest
from sqlalchemy import Engine

from consumer import NewJob
from consumer.config.flow import JobLimit, Rate
from consumer.config.settings import Settings
from consumer.jobs.flow_admin import FlowAdmin
from consumer.jobs.model import Job
from consumer.pipeline.registry import Registry
from consumer.wire.timeutil import utcnow
from tests.jobs.test_flow import Recorder, add, hammer, kinds_of, windows


def most_at_once(calls: Iterable[tuple[float, float, Job]]) -> dict[str, int]:
    """The most jobs of each group that ran at once (from their start and end times)."""
    events: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for start, end, job in calls:
        events[str(job.group_key)] += [(start, 1), (end, -1)]
    most = {}
    for group, moments in events.items():
        held = peak = 0
        for _, change in sorted(moments):  # an end before a start at the same instant
            held += change
            peak = max(peak, held)
        most[group] = peak
    return most


def test_a_group_cap_of_2_holds_for_each_group_and_is_reached(
    engine: Engine, job_settings: Settings
) -> None:
    # Each job held 0.2 s: long enough that a loaded machine still claims a group's second job
    # while its first runs (0.05 s once left a group at 1 under CI's load).
    recorder = Recorder(hold=0.2)
    add(engine, [NewJob("call", {}, group=f"g{n % 3}") for n in range(36)])
    hammer(engine, job_settings, kinds_of(recorder), {"call": JobLimit(group_cap=2)}, 36)
    assert len(recorder.calls) == 36
    assert most_at_once(recorder.calls) == {"g0": 2, "g1": 2, "g2": 2}
    assert recorder.max_held > 2, "the groups did not run side by side"


def test_a_group_at_its_cap_does_not_hold_another_group_back(
    engine: Engine, job_settings: Settings
) -> None:
    recorder = Recorder(hold=0.05)
    add(engine, [NewJob("call", {"n": n}, group="big") for n in range(60)])
    add(engine, [NewJob("call", {"n": "small"}, group="small")])
    hammer(engine, job_settings, kinds_of(recorder), {"call": JobLimit(group_cap=1)}, 3)
    started = sorted(recorder.calls, key=lambda call: call[0])
    assert "small" in [job.group_key for _, _, job in started[:3]]
    assert most_at_once(recorder.calls)["big"] == 1


@pytest.mark.serial  # a rate is measured: other tests' load on the machine slows the starts
def test_a_group_rate_holds_for_each_group_in_every_window(
    engine: Engine, job_settings: Settings
) -> None:
    recorder = Recorder()
    add(engine, [NewJob("call", {}, group=f"g{n % 2}") for n in range(60)])
    rate = JobLimit(group_rate=Rate(20, 1.0))
    hammer(engine, job_settings, kinds_of(recorder), {"call": rate}, 60)
    assert len(recorder.calls) == 60
    for group in ("g0", "g1"):
        starts = sorted(start for start, _, job in recorder.calls if job.group_key == group)
        assert max(windows(starts)) <= 22, f"group {group}: a 1 s window held more than 20 + 10%"
        assert (len(starts) - 1) / (starts[-1] - starts[0]) >= 15, "the rate was not reached"
    both = sorted(start for start, _, _ in recorder.calls)
    assert max(windows(both)) >= 30, "the groups' rates were not each their own"


def test_an_operator_sets_a_group_cap_at_run_time(engine: Engine, job_settings: Settings) -> None:
    admin = FlowAdmin(engine)
    assert admin.change("call", {"group_cap": 1}, "ops", utcnow()) == "group_cap:1"
    recorder = Recorder(hold=0.03)
    add(engine, [NewJob("call", {}, group=f"g{n % 2}") for n in range(12)])
    hammer(engine, job_settings, kinds_of(recorder), {}, 12)
    assert most_at_once(recorder.calls) == {"g0": 1, "g1": 1}
    (shown,) = admin.show({}, ["call"], utcnow())
    assert shown.effective == JobLimit(group_cap=1)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("call=group_cap:x", "kind 'call': group_cap: cap must be a whole number, got 'x'"),
        ("call=group_rate:9", "kind 'call': group_rate: rate must be N/INTERVAL such as 50/1s"),
    ],
)
def test_a_bad_group_limit_is_refused_in_one_line(raw: str, problem: str) -> None:
    with pytest.raises(Exception, match="CONSUMER_JOB_LIMITS") as caught:
        Settings.from_env({"CONSUMER_LOCAL_MODE": "true", "CONSUMER_JOB_LIMITS": raw})
    assert problem in str(caught.value) and "\n" not in str(caught.value)


def test_a_kind_declares_its_group_limits() -> None:
    registry = Registry()
    registry.job_kind("sms", group_cap=2, group_rate="10/s")(lambda context, job: None)
    assert registry.job_limits["sms"] == JobLimit(group_cap=2, group_rate=Rate(10, 1.0))
    with pytest.raises(Exception, match="job kind 'mms': group_rate: rate must be N/INTERVAL"):
        registry.job_kind("mms", group_rate="often")(lambda context, job: None)


def test_time_is_measured_not_assumed() -> None:
    assert most_at_once([(0.0, 1.0, _job("a")), (0.5, 2.0, _job("a")), (1.0, 3.0, _job("a"))]) == {
        "a": 2
    }


def _job(group: str) -> Job:
    now = utcnow()
    return Job(1, "call", {}, "running", 0, now, 1, None, None, now, group_key=group)  # type: ignore[arg-type]
