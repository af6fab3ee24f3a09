"""Long-running work through real gunicorn and a real Node.js target (``tests/jobs/long_target.js``,
the rig in ``bench/long_job.py``), three consumer processes on PostgreSQL:

- the target answers 202, heartbeats every second for ``LONG_JOB_SECONDS`` (10 by default; the
  60 s run is ``python -m bench.long_job``), then completes: the job is ``done`` once, with the
  target's result, called once;
- a stale-token, repeated, unsigned or malformed report is refused (409, 409, 401, 400, 404);
- an operator's cancel is seen by the target at its next heartbeat: it stops, the job ends
  ``cancelled``, and nothing calls it again;
- the consumer process that called the target, and the one the target reports to first, are
  SIGKILLed while the job runs: it still completes exactly once.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator

import pytest
import requests
from sqlalchemy import Engine

from bench.long_job import (
    HELD_LEASE_SECONDS,
    SECRET,
    LongTarget,
    enqueue,
    listening,
    server_env,
    wait_for,
)
from consumer.auth.signature import signed_headers
from consumer.db.engine import make_engine
from consumer.jobs.model import CancelOutcome
from consumer.jobs.store import JobStore
from consumer.wire.timeutil import utcnow
from tests.conftest import Server

pytestmark = [pytest.mark.postgres, pytest.mark.slow]
SECONDS = float(os.environ.get("LONG_JOB_SECONDS", "10"))


@pytest.fixture
def rig(
    postgres_url: str, start_server: Callable[..., Server]
) -> Iterator[tuple[Engine, LongTarget, list[Server]]]:
    if shutil.which("node") is None:
        pytest.skip("node is not installed (scripts/ensure-node installs Debian's nodejs)")
    engine = make_engine(postgres_url)
    target = LongTarget(SECONDS)
    try:
        servers = [start_server(server_env(postgres_url, target.url), workers=1) for _ in range(3)]
        target.report_to([server.url for server in servers])
        listening(engine, 3)
        yield engine, target, servers
    finally:
        target.stop()
        engine.dispose()


def _report(url: str, job_id: int, what: str, claim: str, document: dict[str, object],
            secret: str = SECRET) -> requests.Response:  # fmt: skip
    body = json.dumps(document).encode()
    headers = {"X-Consumer-Claim": claim, "Content-Type": "application/json",
               **signed_headers(secret, int(time.time()), body)}  # fmt: skip
    return requests.post(f"{url}/jobs/{job_id}/{what}", data=body, headers=headers, timeout=10)


def test_a_202_job_heartbeats_completes_once_and_stale_reports_are_refused(
    rig: tuple[Engine, LongTarget, list[Server]],
) -> None:
    engine, target, servers = rig
    job_id = enqueue(engine, SECONDS)
    job = wait_for(engine, job_id, {"done", "dead", "cancelled"}, SECONDS + 30)
    assert job.status.value == "done" and job.attempts == 1
    assert job.result["seconds"] >= SECONDS  # the target's own report of how long it worked
    assert len(target.events(job_id, "call")) == 1  # held, never retried by a sweep
    beats = target.events(job_id, "heartbeat")
    assert len(beats) >= SECONDS - 2 and all(b["status"] == 200 for b in beats)
    assert all(b["answer"]["cancelled"] is False for b in beats)
    assert [c["status"] for c in target.events(job_id, "complete")] == [200]
    claim = target.events(job_id, "call")[0]["claim"]
    url = servers[1].url
    done = {"id": job_id, "outcome": "done"}
    stale = _report(url, job_id, "complete", "host/1/0000000000000000", done)
    assert stale.status_code == 409 and "not running" in stale.json()["error"]
    assert _report(url, job_id, "complete", claim, done).status_code == 409  # exactly once
    assert _report(url, job_id, "complete", claim, done, secret="x" * 26).status_code == 401
    bad = _report(url, job_id, "complete", claim, {"id": job_id, "outcome": "maybe"})
    assert bad.status_code == 400 and "outcome must be one of" in bad.json()["error"]
    assert _report(url, job_id, "complete", claim, {**done, "id": job_id + 1}).status_code == 400
    assert _report(url, 10**9, "complete", claim, done).status_code == 404
    assert _report(url, job_id, "heartbeat", claim, {"id": job_id}).status_code == 409
    after = JobStore(engine).get(job_id)
    assert after is not None and after.result == job.result  # nothing the refusals changed


def test_a_stale_claim_is_refused_while_the_job_runs(
    rig: tuple[Engine, LongTarget, list[Server]],
) -> None:
    engine, target, servers = rig
    job_id = enqueue(engine, SECONDS)
    wait_for(engine, job_id, {"running"}, 20)
    _wait_until(lambda: target.events(job_id, "call"), 20)
    old = {"id": job_id, "outcome": "done"}
    refused = _report(servers[0].url, job_id, "complete", "host/1/0000000000000000", old)
    assert refused.status_code == 409 and "no longer under this claim" in refused.json()["error"]
    job = wait_for(engine, job_id, {"done", "dead", "cancelled"}, SECONDS + 30)
    assert job.status.value == "done"


def test_a_cancel_is_seen_at_the_next_heartbeat_and_never_retried(
    rig: tuple[Engine, LongTarget, list[Server]],
) -> None:
    engine, target, _ = rig
    job_id = enqueue(engine, 120)  # far longer than the test: only the cancel ends it
    _wait_until(lambda: target.events(job_id, "heartbeat"), 20)
    asked = time.monotonic()
    assert JobStore(engine).request_cancel(job_id, utcnow()) is CancelOutcome.REQUESTED
    _wait_until(lambda: target.events(job_id, "stopped"), 10)
    assert time.monotonic() - asked < 3  # one heartbeat later
    job = wait_for(engine, job_id, {"cancelled"}, 5)
    assert job.status.value == "cancelled" and job.finished_at is not None
    time.sleep(HELD_LEASE_SECONDS + 2)  # past any lease: nothing takes it over
    assert len(target.events(job_id, "call")) == 1
    after = JobStore(engine).get(job_id)
    assert after is not None and after.status.value == "cancelled"


def test_a_killed_consumer_process_does_not_stop_the_job_completing_once(
    rig: tuple[Engine, LongTarget, list[Server]],
) -> None:
    """SIGKILL the worker that claimed and called the target, and the consumer the target
    reports to first, while the job runs: the reports fail over, the job completes once."""
    engine, target, servers = rig
    job_id = enqueue(engine, SECONDS)
    _wait_until(lambda: target.events(job_id, "heartbeat"), 20)
    claim = target.events(job_id, "call")[0]["claim"]
    caller = int(claim.split("/")[1])  # the claim names the sweeping worker: host/pid/random
    os.kill(caller, signal.SIGKILL)
    os.kill(servers[0].process.pid, signal.SIGKILL)
    job = wait_for(engine, job_id, {"done", "dead", "cancelled"}, SECONDS + 30)
    assert job.status.value == "done" and job.attempts == 1
    assert len(target.events(job_id, "call")) == 1
    assert [c["status"] for c in target.events(job_id, "complete")] == [200]


def _wait_until(found: Callable[[], object], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not found():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not seen within {timeout}s")
        time.sleep(0.1)
