"""The heartbeat of a live sweeper: short job leases, renewed while the sweeper lives.

A claimed batch is held by a short lease (``CONSUMER_JOB_LEASE_SECONDS``, 3 s by default), so
the batch of a sweeper that was killed is taken over within about one lease. A live sweeper keeps
its batch by renewing the lease from a small thread, on its own connection, every third of a
lease; the renewal is a guarded ``UPDATE`` (``claimed_by`` and ``status = 'running'``), so a
batch that was taken over is never taken back.

Each renewal also reads which of the batch's jobs an operator asked to cancel
(``JobStore.request_cancel``): they join ``cancelled``, and whatever watches one of them
(``watch``: a target call to abandon) is told at once, from the heartbeat's thread.

``held_until`` is the ``time.monotonic()`` value up to which the lease is known to be held: the
sweep starts no job and retries no write past it.

The heartbeat ends: it renews nothing past the sweep's deadline (``until``), so a sweep stuck in
a job lets its batch go about one lease later; and the sweep waits at most ``join_seconds`` for
a renewal in flight as it ends (a renewal stuck on the database must not hold the request past
the watchdog).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from types import TracebackType

from sqlalchemy import Engine

from consumer.jobs.store import JobStore
from consumer.wire.timeutil import Clock

log = logging.getLogger("consumer.jobs.lease")


class LeaseKeeper:
    """Renews the lease of the batch the sweep holds, every ``lease_seconds / 3``."""

    def __init__(
        self,
        engine: Engine,
        lease_seconds: float,
        clock: Clock,
        until: float = math.inf,
        join_seconds: float | None = None,
    ) -> None:
        self.engine = engine
        self.until = until
        """``time.monotonic()`` of the sweep's deadline: no renewal past it."""
        self.join_seconds = join_seconds
        self.store = JobStore(engine)
        self.lease_seconds = lease_seconds
        self.clock = clock
        self.held_until = 0.0
        self._token: str | None = None
        self.cancelled: set[int] = set()
        """Jobs of the claim whose cancel an operator requested (as the last renewal read)."""
        self._watchers: dict[int, list[Callable[[], None]]] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="job-lease", daemon=True)

    def hold(self, token: str, claimed_at: float) -> None:
        """A batch was claimed at ``claimed_at`` (monotonic) under ``token``: keep it."""
        with self._lock:
            self._token = token
            self.held_until = claimed_at + self.lease_seconds

    def fresh(self, now: float | None = None) -> bool:
        """Whether the last renewal is recent enough to start another job: more than a third of
        a lease is left, so at most one beat was missed (renewals fail while the database is
        unreachable; another sweeper may take the batch over once the lease ends)."""
        now = time.monotonic() if now is None else now
        return self.held_until - now > self.lease_seconds / 3

    def ensure_fresh(self, now: float) -> bool:
        """``fresh``, renewing now from the caller's thread if the heartbeat fell behind (a
        starved thread on a busy machine): only a database that cannot be reached stops the
        sweep from starting jobs."""
        if self.fresh(now):
            return True
        with self._lock:
            token = self._token
        if token is not None and now < self.until:
            self._renew(token)
        return self.fresh()

    @contextmanager
    def watch(self, job_id: int, on_cancel: Callable[[], None]) -> Iterator[None]:
        """Call ``on_cancel`` (from the heartbeat's thread) when a renewal finds the job's cancel
        requested, or now if one already did, for as long as the block runs."""
        with self._lock:
            already = job_id in self.cancelled
            self._watchers.setdefault(job_id, []).append(on_cancel)
        if already:
            on_cancel()
        try:
            yield
        finally:
            with self._lock:
                watchers = self._watchers.get(job_id, [])
                if on_cancel in watchers:
                    watchers.remove(on_cancel)
                if not watchers:
                    self._watchers.pop(job_id, None)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stopped.set()
        with self._lock:
            self._token = None  # a renewal still in flight is the last
        self._thread.join(self.join_seconds)
        if self._thread.is_alive():
            log.warning("job lease renewal still running after %s s; not waited for",
                        self.join_seconds)  # fmt: skip

    def _beat(self) -> None:
        while not self._stopped.wait(self.lease_seconds / 3):
            if time.monotonic() >= self.until:
                log.warning("job lease not renewed past the sweep's deadline")
                return
            with self._lock:
                token = self._token
            if token is not None:
                self._renew(token)

    def _renew(self, token: str) -> None:
        started = time.monotonic()
        until = self.clock() + timedelta(seconds=self.lease_seconds)
        try:
            renewed = self.store.renew(token, until)
        except Exception as exc:  # a failed beat must not end the heartbeat
            log.warning("job lease not renewed: %s", exc)
            return
        with self._lock:
            if renewed.count and self._token == token:
                self.held_until = started + self.lease_seconds
            news = renewed.cancelled - self.cancelled
            self.cancelled |= news
            told = [w for job_id in news for w in self._watchers.get(job_id, [])]
        for on_cancel in told:
            on_cancel()
