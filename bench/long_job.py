"""A job longer than any push: a Node.js HTTP target answers its call ``202 Accepted``, works for
``--seconds`` (heartbeating every second through ``POST /jobs/{id}/heartbeat``), then reports
``POST /jobs/{id}/complete`` (docs/long-running-jobs.md). Three real gunicorn consumer processes
on a fresh PostgreSQL database; the job is enqueued with the SQL function, so a NOTIFY starts it.

    python -m bench.long_job --seconds 60

Prints one JSON line: the job's final state, how long it took from enqueue to ``done``, how many
calls the target received (1: it was never retried), heartbeats and completions. The rig
(``LongTarget``, ``servers``) is shared with ``tests/jobs/test_long_running_e2e.py``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import requests
from sqlalchemy import Engine, text

from bench.support.postgres import PG_ADMIN_DSN, migrated_postgres_database
from bench.support.serving import Server, stop_process
from consumer.db.engine import make_engine
from consumer.jobs.model import Job
from consumer.jobs.store import JobStore

SCRIPT = Path(__file__).resolve().parent.parent / "tests" / "jobs" / "long_target.js"
SECRET = "long-job-secret-0123456789"
KIND = "long-report"
HELD_LEASE_SECONDS = 4
"""Short, so a lapse shows within seconds; the target heartbeats every second."""


class LongTarget:
    """``tests/jobs/long_target.js`` in its own process: answers 202, heartbeats, completes."""

    def __init__(self, seconds: float) -> None:
        node = shutil.which("node")
        if node is None:
            raise RuntimeError("node is not installed (scripts/ensure-node installs it)")
        env = {"TARGET_SECRET": SECRET, "SECONDS": str(seconds), "HEARTBEAT_MS": "1000",
               "PATH": "/usr/bin:/bin"}  # fmt: skip
        self.process = subprocess.Popen([node, str(SCRIPT)], stdout=subprocess.PIPE, env=env)
        assert self.process.stdout is not None
        self.url = f"http://127.0.0.1:{json.loads(self.process.stdout.readline())['port']}"

    def report_to(self, urls: list[str]) -> None:
        requests.post(f"{self.url}/_urls", json=urls, timeout=5).raise_for_status()

    def log(self) -> list[dict[str, Any]]:
        return list(requests.get(f"{self.url}/_log", timeout=10).json())

    def events(self, job_id: int, event: str) -> list[dict[str, Any]]:
        return [e for e in self.log() if e.get("id") == job_id and e["event"] == event]

    def stop(self) -> None:
        stop_process(self.process)
        if self.process.stdout is not None:
            self.process.stdout.close()


def server_env(database_url: str, target_url: str) -> dict[str, str]:
    declared = {"name": "long", "url": f"{target_url}/job", "serves": {"job_kind": KIND},
                "auth": {"type": "hmac", "secrets": [SECRET]}, "timeout_seconds": 10}  # fmt: skip
    return {
        "CONSUMER_DATABASE_URL": database_url, "CONSUMER_LOCAL_MODE": "false",
        "CONSUMER_PUSH_TOKEN": "test-push-token-0123456789", "CONSUMER_LOG_LEVEL": "WARNING",
        "CONSUMER_HTTP_TARGETS": json.dumps([declared]),
        "CONSUMER_JOB_HELD_LEASE_SECONDS": str(HELD_LEASE_SECONDS),
        "CONSUMER_JOB_RETRY_BASE_SECONDS": "1",
    }  # fmt: skip


@contextmanager
def servers(
    database_url: str, target: LongTarget, count: int = 3, logs: Path | None = None
) -> Iterator[list[Server]]:
    """``count`` consumer processes (one worker each) the target reports to, in turn; their
    output goes to files in ``logs`` when given."""
    with ExitStack() as stack:
        env = server_env(database_url, target.url)
        started = [
            stack.enter_context(Server(env, workers=1, output=logs and logs / f"server-{n}.log"))
            for n in range(count)
        ]
        target.report_to([server.url for server in started])
        yield started


def enqueue(engine: Engine, seconds: float) -> int:
    """The SQL function, as any language enqueues: its NOTIFY starts the job at once."""
    payload = json.dumps({"seconds": seconds})
    with engine.begin() as connection:
        statement = text("SELECT consumer_enqueue(:kind, CAST(:payload AS jsonb))")
        return int(connection.execute(statement, {"kind": KIND, "payload": payload}).scalar_one())


def wait_for(engine: Engine, job_id: int, statuses: set[str], timeout: float) -> Job:
    deadline = time.monotonic() + timeout
    while True:
        job = JobStore(engine).get(job_id)
        if job is not None and job.status.value in statuses:
            return job
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} is {job.status if job else None} after {timeout}s")
        time.sleep(0.2)


def listening(engine: Engine, count: int, timeout: float = 30) -> None:
    """Until ``count`` processes LISTEN for enqueues (each sweeps on a NOTIFY)."""
    query = text(
        "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN consumer_jobs'"
        " AND datname = current_database()"
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with engine.connect() as connection:
            if connection.execute(query).scalar_one() >= count:
                return
        time.sleep(0.1)
    raise TimeoutError(f"fewer than {count} listeners after {timeout}s")


def run(seconds: float) -> dict[str, Any]:
    with ExitStack() as stack:
        url = stack.enter_context(migrated_postgres_database(PG_ADMIN_DSN, "consumer_long"))
        engine = make_engine(url)
        stack.callback(engine.dispose)
        target = LongTarget(seconds)
        stack.callback(target.stop)
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        stack.enter_context(servers(url, target, logs=logs))
        listening(engine, 3)
        started = time.monotonic()
        job_id = enqueue(engine, seconds)
        job = wait_for(engine, job_id, {"done", "dead", "cancelled"}, seconds + 60)
        took = time.monotonic() - started
        beats = target.events(job_id, "heartbeat")
        return {
            "job": job_id, "status": job.status.value, "seconds": round(took, 2),
            "result": job.result, "attempts": job.attempts,
            "calls": len(target.events(job_id, "call")),
            "heartbeats": len(beats), "heartbeats_ok": sum(b["status"] == 200 for b in beats),
            "completions": [c["status"] for c in target.events(job_id, "complete")],
        }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the job works")
    args = parser.parse_args(argv)
    if not 1 <= args.seconds <= 600:
        parser.error("--seconds must be 1..600")
    result = run(args.seconds)
    print(json.dumps(result))
    ok = result["status"] == "done" and result["calls"] == 1 and result["completions"] == [200]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
