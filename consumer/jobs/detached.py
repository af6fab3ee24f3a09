"""Python jobs longer than one push: a kind declared in ``CONSUMER_JOB_MAX_SECONDS`` runs in a
thread of its own, past the sweep (and the push) that claimed it (docs/long-running-jobs.md).

The sweep records such a job as held (as a target's 202): still ``running`` under its claim. The
thread keeps the claim with a lease heartbeat of its own (``consumer.jobs.lease``) that renews
nothing past the kind's maximum, so a job that overruns it, or whose process dies, has its lease
lapse and is retried under a new claim. Its result is written with the sweep's guarded writes
(``JobStore.complete``): an operator's cancel still ends it ``cancelled``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.errors import Permanent, Unavailable
from consumer.jobs.kinds import JobContext, JobHandler
from consumer.jobs.lease import LeaseKeeper
from consumer.jobs.model import Failure, Job, JobCancelled
from consumer.jobs.retry import describe
from consumer.jobs.store import JobStore
from consumer.wire.timeutil import Clock

log = logging.getLogger("consumer.jobs.detached")
FailureOf = Callable[[Job, str, bool], Failure]
"""The sweep's ``_failure``: a failed run's backoff and error history."""
RECORD_TRIES = 10


class Detached:
    """Starts long jobs in threads of their own, one per job."""

    def __init__(self, settings: Settings, engine: Engine, clock: Clock) -> None:
        self.settings, self.engine, self.clock = settings, engine, clock
        self.store = JobStore(engine)
        self.threads: list[threading.Thread] = []
        """Every thread started (a test, or a clean shutdown, may join them)."""

    def start(
        self, job: Job, token: str, handler: JobHandler, max_seconds: float, failure: FailureOf
    ) -> threading.Thread:
        """Run ``handler`` on ``job`` for at most ``max_seconds``, holding the claim ``token``."""
        thread = threading.Thread(
            target=self._run, args=(job, token, handler, max_seconds, failure),
            name=f"job-{job.id}", daemon=True,
        )  # fmt: skip
        thread.start()
        self.threads.append(thread)
        return thread

    def _run(
        self, job: Job, token: str, handler: JobHandler, max_seconds: float, failure: FailureOf
    ) -> None:
        started = time.monotonic()
        deadline = started + max_seconds
        lease_seconds = self.settings.jobs.lease_seconds
        with LeaseKeeper(self.engine, lease_seconds, self.clock, until=deadline) as lease:
            lease.hold(token, started)
            context = JobContext(self.settings, self.engine, deadline, lease=lease, token=token)
            context.job = job
            done, failed = False, None
            with context:
                try:
                    handler(context, job)
                    done = True
                except (Permanent, JobCancelled) as exc:
                    failed = failure(job, describe(exc), True)
                except Exception as exc:
                    log.warning("job %s (%s) failed", job.id, job.kind, exc_info=True)
                    limit = job.max_attempts or self.settings.jobs.max_attempts
                    failed = failure(job, describe(exc), job.attempts >= limit)
            self._record(job, token, done, failed)

    def _record(self, job: Job, token: str, done: bool, failed: Failure | None) -> None:
        """The guarded write of the result, retried through a database blip."""
        for attempt in range(RECORD_TRIES):
            try:
                self.store.complete(
                    token, self.clock(), [job.id] if done else [], [failed] if failed else []
                )
                return
            except Unavailable as exc:
                log.warning("job %s: recording failed, retrying: %s", job.id, exc)
                time.sleep(min(2.0, 0.1 * 2**attempt))
        log.error("job %s: result not recorded; its lease lapses and it is retried", job.id)
