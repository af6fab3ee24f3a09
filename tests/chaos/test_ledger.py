"""The chaos ledger's rules on hand-made records (no processes): what counts as lost, which fault
explains a repeat, and how recovery is read from the effects' timeline."""

from __future__ import annotations

from bench.chaos.faults import Fault
from bench.chaos.ledger import JobRow, Records, account
from bench.chaos.load import Published, Upload
from bench.chaos.report import Timeline, recoveries
from bench.chaos.sinks import Call

MAIL = ["mail-0-0", "mail-0-1"]


def records(*jobs: JobRow) -> Records:
    events: dict[str, tuple[str, str, float | None]]
    events = {f"job:{job.key}": ("job", "done", 1.0) for job in jobs}
    return Records(list(jobs), events)


def emails() -> Records:
    return records(
        JobRow(1, "email", "done", MAIL[0], 10.0), JobRow(2, "email", "done", MAIL[1], 10.0)
    )


def copies(job: int, *times: float) -> list[tuple[str, float]]:
    return [(f"<job-{job}.20261201000000@example.com>", at) for at in times]


def test_a_done_email_that_never_arrived_is_lost() -> None:
    found = account(Published(mail_jobs=MAIL), emails(), copies(1, 5.0), [], [])
    assert found.lost == {"emails": 1}
    assert not found.duplicates


def test_events_and_rows_without_their_record_are_lost() -> None:
    published = Published(mail_jobs=MAIL, uploads=[Upload("mail/u0.csv", 7, rows=2)])
    found = account(published, records(JobRow(1, "email", "running", MAIL[0], None)), [], [], [])
    assert found.lost == {"events": 2, "jobs": 4}  # the upload's event and rows, job 2, job 1


def test_a_repeat_is_attributed_only_to_a_fault_between_its_copies_that_explains_it() -> None:
    mail = copies(1, 5.0, 30.0) + copies(2, 6.0)
    published = Published(mail_jobs=MAIL)

    def attributed(*faults: Fault) -> int:
        found = account(published, emails(), mail, [], list(faults))
        assert len(found.duplicates) == 1 and not found.lost
        return found.attributed

    assert attributed() == 0
    assert attributed(Fault("kill", "kill #1", 20.0, 20.0, frozenset({1}))) == 1
    assert attributed(Fault("kill", "kill #1", 20.0, 20.0, frozenset({2}))) == 0  # held others
    assert attributed(Fault("kill", "kill #1", 20.0, 20.0, None)) == 1  # unknown: any kill
    assert attributed(Fault("worker-exit", "worker-exit #1", 20.0, 20.0, frozenset({1}))) == 1
    assert attributed(Fault("worker-exit", "worker-exit #1", 20.0, 20.0, frozenset())) == 0
    assert attributed(Fault("db-cut", "db-cut #1", 31.0, 35.0)) == 0  # after the repeat
    assert attributed(Fault("pg-restart", "pg-restart #1", 2.0, 5.2)) == 1
    assert attributed(Fault("target-fail", "target-fail #1", 10.0, 12.0)) == 0  # not its sink
    assert attributed(Fault("smtp-stall", "smtp-stall #1", 10.0, 12.0)) == 1
    assert attributed(Fault("pod-pause", "pod-pause #1", 8.0, 20.0, frozenset({1}))) == 1
    assert attributed(Fault("pod-pause", "pod-pause #1", 8.0, 20.0, frozenset({2}))) == 0
    assert attributed(Fault("db-pause", "db-pause #1", 8.0, 20.0)) == 1


def test_a_repeated_call_of_a_done_key_is_a_duplicate() -> None:
    published = Published(call_jobs=["call-0-0"], releases=["r0"])
    jobs = records(JobRow(1, "call", "done", "call-0-0", 3.0))
    jobs.events["deploy:web:r0"] = ("deploy", "done", 3.0)
    calls = [Call("call-0-0", "/job", "500", 1.0), Call("call-0-0", "/job", "done", 2.0),
             Call("call-0-0", "/job", "duplicate", 9.0)]  # fmt: skip
    found = account(published, jobs, [], calls, [])
    assert found.lost == {"calls": 1}  # the deploy never reached the target
    assert [(d.identity, d.first, d.again) for d in found.duplicates] == [("call-0-0", 2.0, 9.0)]


def test_recovery_lasts_until_the_rate_is_back_or_the_killed_pod_s_jobs_are_done() -> None:
    steady = [n / 10 for n in range(0, 200)]  # 10 effects a second for 20 s ...
    gap = [at for at in steady if not 10.0 <= at < 14.0]  # ... none for 4 s after the fault
    timeline = Timeline(emails=gap, calls=[], events=[])
    jobs = Records([JobRow(9, "email", "done", "k", 17.5)], {})
    cut = Fault("db-cut", "db-cut #1", 9.0, 10.0)
    kill = Fault("kill", "kill #1", 9.0, 10.0, frozenset({9}))
    recovered = recoveries([cut, kill], timeline, jobs)
    assert 2.0 <= recovered[0] <= 4.0  # half the rate over the next 3 s is back ~2.5 s in
    assert recovered[1] == 7.5  # the held job finished 7.5 s after the kill


def test_a_burst_before_a_fault_does_not_raise_the_rate_to_recover() -> None:
    """A backlog released after an earlier fault (50 a second for 10 s) just before a kill that
    changed nothing: recovered at once, since the steady 10 a second never stopped."""
    steady = [n / 10 for n in range(0, 600)]  # 10 effects a second for 60 s ...
    burst = [20.0 + n / 50 for n in range(500)]  # ... and 50 more a second from 20 to 30 s
    timeline = Timeline(emails=sorted(steady + burst), calls=[], events=[])
    kill = Fault("kill", "kill #1", 30.0, 30.0, frozenset())
    assert recoveries([kill], timeline, Records([], {})) == [0.0]
