"""Start a job the moment its enqueue commits: one ``LISTEN`` connection per serving process.

``consumer_enqueue(...)`` (migration ``0010_sql_enqueue``) NOTIFYs channel ``consumer_jobs``
for a job due now; PostgreSQL delivers the notification when the caller's transaction commits,
and never if it rolls back. Each serving process holds one connection that LISTENs, blocked on
its socket (no pod polls the jobs), and on a notification sweeps in-process, the same sweep a
wake-up tick runs (``Dispatcher.run_unclaimed``, like ``consumer sweep --once``): the job claims
keep it apart from every other sweep, here or on another pod. Notifications that arrive while a
sweep runs fold into one more sweep after it.

Nothing here runs on a request's thread or holds a pooled connection while it waits. The
connection is re-opened with a growing backoff when it breaks (a database restart, a failover),
followed by one sweep for what committed while it did not listen; a quiet connection is pinged
every ``PING_SECONDS`` so a silently dead one is noticed. On (re)connecting it first declares
the process's kinds (``consumer.jobs.declared``), which ``consumer_enqueue`` checks.

SQLite has neither NOTIFY nor the function: nothing starts there, and Python's enqueue wakes a
sweeper as before (``consumer.jobs.wake``), as it does for a pod that cannot listen.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine

from consumer.db.dialect import POSTGRESQL
from consumer.jobs.declared import declare
from consumer.jobs.notify import CHANNEL
from consumer.pipeline.decision_log import Source
from consumer.pipeline.dispatch import Dispatcher
from consumer.wire.events import TickEvent
from consumer.wire.message import PushMessage
from consumer.wire.timeutil import utcnow

log = logging.getLogger("consumer.jobs.listen")
TASK = "sweep"
PREFIX = "notify-"
PING_SECONDS = 30.0
FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 30.0
LISTENER_ATTRIBUTE = "consumer_listener"
"""The attribute of an engine that holds its process's ``Listener`` (set by ``start``), so no
table of engines lives beside them: each service's engine has its own."""
_lock = threading.Lock()


def start(dispatcher: Dispatcher) -> Listener | None:
    """This process's listener for the dispatcher's database (started once per process and
    engine, held by the engine); ``None`` on SQLite."""
    engine = dispatcher.engine
    if engine.dialect.name != POSTGRESQL:
        return None
    with _lock:
        listener = listener_of(engine)
        if listener is None:
            sweeps = Coalesced(lambda: sweep_now(dispatcher), "notify-sweep")
            listener = Listener(dispatcher, sweeps.request)
            setattr(engine, LISTENER_ATTRIBUTE, listener)
        return listener


def listener_of(engine: Engine) -> Listener | None:
    """The listener this process started for ``engine`` (a forked child's parent's is not)."""
    listener: Listener | None = getattr(engine, LISTENER_ATTRIBUTE, None)
    return listener if listener is not None and listener.pid == os.getpid() else None


def sweep_now(dispatcher: Dispatcher) -> None:
    """One sweep, decided as a wake-up's is (logged and counted), without an inbox row."""
    now, schedule = utcnow(), dispatcher.registry.schedule_of(TASK)
    run_id = PREFIX + uuid.uuid4().hex
    message = PushMessage(run_id, now, attributes={"task": TASK, "continuation": run_id})
    event = TickEvent(TASK, schedule.slot_of(now), schedule, message, continuation=run_id)
    try:
        dispatcher.run_unclaimed(event, Source.NOTIFY, None)
    except Exception:  # the next notification or tick sweeps again
        log.exception("sweep on notification failed")


class Coalesced:
    """Runs ``work`` on a daemon thread of its own whenever requested; requests made while it
    runs fold into one more run after it."""

    def __init__(self, work: Callable[[], None], name: str) -> None:
        self._work = work
        self._due = threading.Event()
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def request(self) -> None:
        self._due.set()

    def _run(self) -> None:
        while True:
            self._due.wait()
            self._due.clear()
            self._work()


class Listener:
    """One thread, one connection outside the pool, blocked until a notification comes."""

    def __init__(self, dispatcher: Dispatcher, notified: Callable[[], None]) -> None:
        self.dispatcher = dispatcher
        self.notified = notified
        self.pid = os.getpid()
        self.connected = threading.Event()
        """Set while the connection listens (tests and benches wait on it)."""
        self.sessions = 0
        """Sessions that reached LISTEN; after the first, each sweeps once for what it missed."""
        threading.Thread(target=self._run, name="notify-listener", daemon=True).start()

    def _run(self) -> None:
        backoff = FIRST_BACKOFF_SECONDS
        while True:
            before = self.sessions
            try:
                self._listen()
            except Exception as exc:  # broken connection, database down: try again later
                if self.sessions > before:  # it did listen: the first retry comes soon
                    backoff = FIRST_BACKOFF_SECONDS
                log.warning("LISTEN %s lost, again in %.1f s: %s", CHANNEL, backoff, exc)
            time.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    def _listen(self) -> None:
        """Declare the kinds, LISTEN (after a reconnect, sweep once), then wait; returns only by
        raising."""
        engine = self.dispatcher.engine
        with engine.begin() as connection:
            registry = self.dispatcher.registry
            declare(connection, registry.job_kinds, self.dispatcher.settings, registry.job_limits)
        raw = engine.raw_connection()
        driver: Any = raw.driver_connection
        raw.detach()  # ours alone, closed (not pooled) at the end
        try:
            raw.rollback()
            driver.autocommit = True
            driver.execute(f"LISTEN {CHANNEL}")
            self.sessions += 1
            self.connected.set()
            if self.sessions > 1:
                self.notified()  # what committed while this process did not listen
            self._wait(driver)
        finally:
            self.connected.clear()
            driver.close()  # ours alone; a broken connection closes without a word
            raw.invalidate()  # nothing left for the pool to roll back (it would log the failure)

    def _wait(self, driver: Any) -> None:
        while True:
            if any(True for _ in driver.notifies(timeout=PING_SECONDS, stop_after=1)):
                self.notified()
            else:
                driver.execute("SELECT 1")  # a dead connection raises here
