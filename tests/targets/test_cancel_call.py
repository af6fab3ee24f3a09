"""A cancelled job's target call is abandoned: the target holds the call open (it never
answers); an operator cancels the job; the sweep's heartbeat shuts the connection (the target
sees it closed), the run ends at once, far before the call's timeout, and the job ends
``cancelled``, never retried. On SQLite and PostgreSQL."""

from __future__ import annotations

import socket
import threading
import time

from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.config.targets import target
from consumer.jobs.model import CancelOutcome, NewJob, Status
from consumer.jobs.store import JobStore
from consumer.jobs.sweep import Sweeper
from consumer.pipeline.registry import Registry
from consumer.targets.call import Caller
from consumer.targets.install import JobTarget
from consumer.wire.timeutil import utcnow


class Silent:
    """Accepts one call, reads it, never answers; records when the caller closed it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/job"
        self.called, self.closed = threading.Event(), threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with self.sock:
            connection, _ = self.sock.accept()
        with connection:
            connection.recv(65536)
            self.called.set()
            while connection.recv(65536):  # b"": the caller shut the connection
                pass
            self.closed.set()


def test_a_cancel_abandons_the_call_and_the_job_ends_cancelled(
    engine: Engine, database_url: str
) -> None:
    silent = Silent()
    spec = target("silent", url=silent.url, serves={"job_kind": "slow-call"},
                  auth={"type": "none"}, timeout_seconds=60)  # fmt: skip
    registry = Registry()
    registry.job_kinds.add("slow-call", JobTarget(Caller(spec, lambda audience, deadline: "")))
    settings = Settings.of(database_url=database_url, local_mode=True, job_lease_seconds=1)
    job_id = JobStore(engine).enqueue(NewJob("slow-call", {}), allow_unknown=True).job_id
    assert job_id is not None
    sweeper = Sweeper(settings, engine, registry.job_kinds)
    runner = threading.Thread(target=lambda: sweeper.run(time.monotonic() + 60))
    runner.start()
    assert silent.called.wait(10)
    asked = time.monotonic()
    assert JobStore(engine).request_cancel(job_id, utcnow()) is CancelOutcome.REQUESTED
    assert silent.closed.wait(5)  # the heartbeat shut the call's connection
    runner.join(10)
    assert not runner.is_alive() and time.monotonic() - asked < 5  # not the 60 s timeout
    job = JobStore(engine).get(job_id)
    assert job is not None and job.status is Status.CANCELLED
    assert "abandoned" in (job.last_error or "")
    assert Sweeper(settings, engine, registry.job_kinds).run(time.monotonic() + 5).claimed == 0
