"""How the sweep records results: guarded writes of a batch's results (``JobStore.complete``),
retried with backoff through a database outage for as long as they record effects.

A write that records effects is retried until the budget runs out, and nothing new is started
meanwhile: every write is guarded by the claim's token, so a record made after the lease ran out
either still finds the rows (nobody took them) or records nothing. A write that records none (the
first claim, a release) is retried through a short blip only."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from sqlalchemy import Connection

from consumer.db.engine import unavailable_on_db_fault
from consumer.errors import Unavailable
from consumer.jobs.batch import NOTHING, Batch, Flushes
from consumer.jobs.model import Written
from consumer.jobs.pace import Pace
from consumer.jobs.store import JobStore
from consumer.wire.timeutil import Clock

log = logging.getLogger("consumer.jobs.sweep")
T = TypeVar("T")
BLIP_SECONDS = 0.6
"""How long a write that records no effect (the first claim, a release) is retried."""
MAX_PAUSE_SECONDS = 1.0


class Recorder:
    """One sweep's writes of its results, on the sweep's connection."""

    def __init__(
        self, store: JobStore, clock: Clock, pace: Pace, flushes: Flushes, held_seconds: float
    ) -> None:
        self.store = store
        self.clock = clock
        self.pace = pace
        self.flushes = flushes
        self.held_seconds = held_seconds
        """The lease a job whose target answered 202 holds, until its target's next heartbeat
        (``CONSUMER_JOB_HELD_LEASE_SECONDS``)."""

    def _held_until(self) -> datetime:
        return self.clock() + timedelta(seconds=self.held_seconds)

    def retrying(self, connection: Connection, write: Callable[[], T], give_up: float) -> T:
        """``write`` in a transaction, retried with backoff through an outage until
        ``give_up``: effects it records happened, and losing their record would make another
        sweeper run them again."""
        pause = 0.05
        while True:
            try:
                with unavailable_on_db_fault(), connection.begin():
                    return write()
            except Unavailable as exc:
                if time.monotonic() + pause >= give_up:
                    raise
                log.warning("recording results failed, retrying: %s", exc)
                time.sleep(pause)
                pause = min(2 * pause, MAX_PAUSE_SECONDS)

    def give_up_at(self, finished: Batch | None, started: float, deadline: float) -> float:
        """Effects to record: retry while the budget lasts (the writes are guarded, so one
        that comes after the lease is safe). None: a short blip is retried, a longer outage is
        the tick's 503."""
        if finished is None or not finished.pending():
            return started + BLIP_SECONDS
        return deadline - self.pace.reserve()

    def record(self, connection: Connection, batch: Batch | None) -> Written:
        """The results of ``batch`` no flush recorded, and its unrun jobs released (in the
        caller's transaction)."""
        if batch is None:
            return NOTHING
        done, failures = batch.unrecorded()
        held, until = batch.held[batch.held_mark :], self._held_until()
        return self.store.complete(
            batch.token, self.clock(), done, failures, batch.unrun, held=held, held_until=until,
            connection=connection,
        )  # fmt: skip

    def flush(self, connection: Connection, batch: Batch, deadline: float) -> None:
        """Record the results held so far, before another job starts."""
        started, (done, failures) = time.monotonic(), batch.unrecorded()
        marks = len(batch.done), len(batch.failures)
        held = batch.held[batch.held_mark :]

        def write() -> Written:
            return self.store.complete(
                batch.token, self.clock(), done, failures, held=held,
                held_until=self._held_until(), connection=connection,
            )  # fmt: skip

        written = self.retrying(connection, write, deadline - self.pace.reserve())
        self.flushes.recorded(time.monotonic() - started)
        batch.mark_recorded(*marks, written)
        batch.held_mark += len(held)
        batch.lost = batch.lost or written.total < len(done) + len(failures)
