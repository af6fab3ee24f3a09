"""The sweep: claim due jobs in batches, run each through its kind, record the results with
guarded writes as it goes, and stop before the time budget runs out (docs/architecture.md §2.4
and §4).

Claims stay batched; results are not. A job that took longer than a commit is recorded before
the next one starts, and fast jobs' results at least every ``CONSUMER_SWEEP_FLUSH_MS``
(``consumer.jobs.batch.Flushes``), on the sweep's own connection; the last results of a batch are
recorded in the transaction that claims the next. A sweeper killed mid-batch therefore repeats, on
takeover, at most the job it was running plus the fast jobs of one flush window; a kind declared
``record_each`` (the built-in ``email``) has each result recorded before the next job starts, so
only the job it was running.

The claimed batch is held by a short lease that a heartbeat renews (``consumer.jobs.lease``); the
writes that record results are ``consumer.jobs.recorder``'s, retried through an outage, and the
batches are sized by ``consumer.jobs.pace``."""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, Engine

from consumer.config.flow import JobLimit
from consumer.config.jobs import max_seconds_of
from consumer.config.settings import Settings
from consumer.db.engine import unavailable_on_db_fault
from consumer.errors import Permanent
from consumer.jobs.batch import Batch, Flushes, plus
from consumer.jobs.detached import Detached
from consumer.jobs.kinds import JobContext
from consumer.jobs.lease import LeaseKeeper
from consumer.jobs.model import Failure, Job, JobCancelled, JobHeld, Written
from consumer.jobs.pace import Pace
from consumer.jobs.recorder import Recorder
from consumer.jobs.retry import describe, next_run_at, with_error
from consumer.jobs.store import JobStore
from consumer.jobs.throttle import Throttle
from consumer.observe import metrics, spans
from consumer.pipeline.extensions import JobKinds
from consumer.wire.timeutil import Clock, utcnow

log = logging.getLogger("consumer.jobs.sweep")


@dataclass
class SweepSummary:
    """The sweep's JSON result."""

    claimed: int = 0
    done: int = 0
    retried: int = 0
    dead: int = 0
    released: int = 0
    """Claimed but not run for lack of time; pending again, no attempt used."""
    lost: int = 0
    """Results not recorded because the lease had been taken over."""
    held: int = 0
    """Left running under their claim: the target answered 202 and reports the rest."""
    batches: int = 0
    still_due: int = 0
    unknown_kinds: dict[str, int] = field(default_factory=dict)
    """Due jobs of kinds no registered plugin provides (no sweeper here can run them)."""
    throttled: dict[str, int] = field(default_factory=dict)
    """Due jobs of kinds the last claim held back for their cap or rate (docs/flow-control.md)."""
    budget_left: float = 0.0
    stopped: str = "drained"
    """``drained`` (nothing due), ``unknown_kinds`` (only jobs of unknown kinds are due),
    ``throttled`` (only jobs held back by flow control are due), ``budget`` (no time left), or
    ``lease`` (the lease could not be renewed)."""

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "budget_left": round(self.budget_left, 3)}

    def add(self, batch: Batch, written: Written) -> None:
        self.done += written.done
        self.retried += written.retried
        self.dead += written.dead
        self.released += written.released
        self.held += written.held
        self.lost += len(batch.jobs) - written.total


def job_lease_seconds(settings: Settings) -> int:
    return settings.jobs.lease_seconds


class Sweeper:
    """Works off due jobs until none is left or the budget is spent."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        kinds: JobKinds,
        clock: Clock = utcnow,
        limits: Mapping[str, JobLimit] | None = None,
        record_each: Collection[str] = (),
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.store = JobStore(engine)
        self.kinds = kinds
        self.clock = clock
        self.pace = Pace()
        self.flushes = Flushes(settings.jobs.sweep_flush_ms / 1000)
        self.record_each = frozenset(record_each)
        """Kinds whose results are recorded one by one (``Registry.job_kind(record_each=True)``)."""
        self.flow = Throttle(self.store, limits or {}, clock)
        held = settings.jobs.held_lease_seconds
        self.recorder = Recorder(self.store, clock, self.pace, self.flushes, held)
        self.worker = f"{socket.gethostname()[:24]}/{os.getpid()}"
        self.long_kinds = max_seconds_of(settings.jobs.max_seconds)
        """Kinds that run past the sweep, each with its maximum (``CONSUMER_JOB_MAX_SECONDS``)."""
        self.detached = Detached(settings, engine, clock)

    def run(self, deadline: float) -> SweepSummary:
        """Sweep until drained or ``deadline`` (a ``time.monotonic()`` value) is near.

        One connection serves the whole sweep: the flushes while a batch runs, and the
        transaction that records the rest of the batch just run *and* claims the next."""
        summary = SweepSummary()
        self.lease = LeaseKeeper(
            self.engine, job_lease_seconds(self.settings), self.clock, until=deadline,
            join_seconds=self.settings.database_waits.lease_join,
        )  # fmt: skip
        with unavailable_on_db_fault(), self.engine.connect() as connection, self.lease:
            finished: Batch | None = None
            size = self._next_size(deadline, first=True)
            reason = "" if size else "budget"
            while True:
                batch = self._exchange(connection, finished, size, deadline, summary)
                if not batch.jobs and size and self.flow.wait(deadline - self.pace.reserve()):
                    finished = None  # throttled: a start is allowed again, claim once more
                    continue
                if not batch.jobs:
                    summary.stopped = reason or "drained"
                    break
                self._work(connection, batch, deadline, summary)
                finished = batch
                size, reason = self._next(batch, deadline)
            self._count_due(connection, summary)
        summary.budget_left = deadline - time.monotonic()
        return summary

    def _count_due(self, connection: Connection, summary: SweepSummary) -> None:
        due = self.store.due_by_kind(self.clock(), connection=connection)
        summary.still_due = sum(due.values())
        summary.unknown_kinds = {k: n for k, n in sorted(due.items()) if k not in self.kinds}
        summary.throttled = self.flow.left(due)
        if summary.stopped == "drained" and summary.throttled:
            summary.stopped = "throttled"
        if summary.stopped == "drained" and summary.unknown_kinds:
            summary.stopped = "unknown_kinds"

    def _next(self, batch: Batch, deadline: float) -> tuple[int, str]:
        """How many to claim next (0: only record ``batch``), and why the sweep would stop."""
        if batch.unrun:
            return 0, "budget" if self.lease.fresh() and not batch.lost else "lease"
        if len(batch.jobs) < batch.requested and not self.flow.held:
            return 0, "drained"  # nothing more was due
        size = self._next_size(deadline, first=False)
        return size, "" if size else "budget"

    def _next_size(self, deadline: float, first: bool) -> int:
        """As many jobs as the budget can cover at the pace seen so far (the lease is renewed,
        so it does not bound a batch)."""
        available = deadline - time.monotonic() - self.pace.reserve()
        return self.pace.batch_size(available, self.settings.jobs.sweep_batch_size, first)

    def _exchange(
        self,
        connection: Connection,
        finished: Batch | None,
        size: int,
        deadline: float,
        summary: SweepSummary,
    ) -> Batch:
        """In one transaction: record the rest of ``finished``, claim up to ``size`` jobs."""
        started = time.monotonic()
        give_up = self.recorder.give_up_at(finished, started, deadline)

        def exchange() -> tuple[Written, Batch]:
            return self.recorder.record(connection, finished), self._claim(connection, size)

        written, batch = self.recorder.retrying(connection, exchange, give_up)
        self.pace.observe_write(time.monotonic() - started)
        if finished is not None:
            summary.add(finished, plus(finished.recorded, written))
            metrics.sweep_batch_recorded(finished)
        if batch.jobs:
            self.lease.hold(batch.token, started)
        return batch

    def _claim(self, connection: Connection, size: int) -> Batch:
        token = f"{self.worker}/{uuid.uuid4().hex[:16]}"
        if size == 0:
            return Batch(token, [], requested=0)
        now = self.clock()
        until = now + timedelta(seconds=job_lease_seconds(self.settings))
        names = self.kinds.names()
        claimed = self.flow.claim(connection, token, size, names, now, until)
        return Batch(token, claimed, requested=size)

    @metrics.timed_sweep_batch
    def _work(
        self, connection: Connection, batch: Batch, deadline: float, summary: SweepSummary
    ) -> None:
        """Run the batch's jobs in order, recording results when ``Flushes`` says so; those
        the time left cannot cover, or that would start while the lease is not known to be
        held, stay unrun."""
        summary.batches += 1
        summary.claimed += len(batch.jobs)
        stop_at = deadline - self.pace.reserve()
        pace, fresh, run, monotonic = self.pace, self.lease.ensure_fresh, self._run, time.monotonic
        due, each, flush = self.flushes.due, self.record_each, self.recorder.flush
        start_at = self.flow.start_at if self.flow.slots.waiting() else None
        traced = spans.enabled()  # off: no span's context per job
        self.flushes.begin()
        with JobContext(
            self.settings, self.engine, deadline, lease=self.lease, token=batch.token
        ) as context:
            for job in batch.jobs:  # per job: a no-op job costs little more than this loop
                if start_at is not None:
                    start_at(job)  # a rate-limited job waits for its slot
                started = monotonic()
                if batch.lost or not (started + pace.job_seconds <= stop_at and fresh(started)):
                    batch.unrun.append(job.id)
                    continue
                context.job = job
                run(context, job, batch, traced)
                if due(started, monotonic()) or job.kind in each or batch.holding():
                    flush(connection, batch, deadline)
                pace.observe_job(monotonic() - started)

    def _run(self, context: JobContext, job: Job, batch: Batch, traced: bool) -> None:
        limit = job.max_attempts or self.settings.jobs.max_attempts
        if job.attempts > limit:
            error = f"attempts exhausted: claimed {job.attempts} times (did a sweeper die?)"
            batch.failures.append(self._failure(job, error, dead=True))
            return
        handler = self.kinds.get(job.kind)
        if handler is not None and job.kind in self.long_kinds:  # runs past this sweep
            self.detached.start(job, batch.token, handler, self.long_kinds[job.kind], self._failure)
            batch.held.append(job.id)
            return
        try:
            if handler is None:  # unregistered after the claim: not this job's fault
                raise LookupError(f"no job kind {job.kind!r}")
            if traced:
                with spans.job_run(job):  # a child of the enqueuing span, linked to the sweep's
                    handler(context, job)
            else:
                handler(context, job)
        except JobHeld:
            batch.held.append(job.id)  # its target reports the rest (docs/long-running-jobs.md)
        except (Permanent, JobCancelled) as exc:  # a cancelled job's row ends cancelled
            batch.failures.append(self._failure(job, describe(exc), dead=True))
        except Exception as exc:
            log.warning("job %s (%s) failed", job.id, job.kind, exc_info=True)
            batch.failures.append(self._failure(job, describe(exc), dead=job.attempts >= limit))
        else:
            batch.done.append(job.id)

    def _failure(self, job: Job, error: str, dead: bool) -> Failure:
        now = self.clock()
        base, cap = self.settings.jobs.retry_base_seconds, self.settings.jobs.retry_max_seconds
        return Failure(
            job_id=job.id,
            dead=dead,
            run_at=job.run_at if dead else next_run_at(now, job.attempts, base, cap),
            error=error,
            errors=with_error(job.errors, job.attempts, now, error),
        )
