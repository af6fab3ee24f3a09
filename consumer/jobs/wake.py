"""Wake-ups: a committed enqueue makes one pod sweep the due jobs now, not at the next tick.

After an enqueue commits, this process publishes a wake-up on ``CONSUMER_WAKE_TOPIC``: a
``sweep`` tick with a ``continuation=wake-<uuid>`` attribute, so its inbox key is its own
(``tick:sweep:continuation:wake-...``): it never collides with a scheduled slot, is never stale
and never advances one. It is signed (``consumer.wire.signed``, ``CONSUMER_SIGNING_SECRETS``):
outside local mode the service honours no unsigned continuation, so a process that cannot sign
sends none. Whichever pod the push reaches sweeps; the job claims keep concurrent
sweeps apart, and the scheduled tick stays the safety net for a wake-up that was lost. In local
mode, without Pub/Sub, the wake-up is POSTed to the local server instead (``CONSUMER_WAKE_URL``).

Nothing here may slow or fail an enqueue: the enqueue only sets an event; one daemon thread per
process and engine sends, coalescing every request of a ``CONSUMER_WAKE_WINDOW_MS`` window into
one wake-up (the last request is always served after it was made), and logs a failure. The
thread blocks on that event while nothing is enqueued: no pod polls. A process that exits right
after enqueuing (the CLI) waits up to ``EXIT_FLUSH_SECONDS`` for its last wake-up. A local
wake-up waits for the sweep's answer no longer than the ack deadline (a wall-clock deadline on
the whole exchange): the server's own watchdog has ended that sweep by then.

The engine an enqueue runs on says where to wake: the composition root attaches its settings
to the service's engine (``attach``), and the engine itself then holds its ``Waker`` (the target
and this process's sender thread), so no table of engines or senders lives beside it: two
services in one process, each with its engine, never share a sender. An engine nobody attached
wakes nobody.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass, field

from sqlalchemy import Connection, Engine, event

from consumer.config.settings import Settings
from consumer.outbound.deadline import Deadline, deadline_session
from consumer.pipeline import admission, continuation
from consumer.wire import signed
from consumer.wire.envelopes_out import wrapped_body

log = logging.getLogger("consumer.jobs.wake")
TASK = "sweep"
PREFIX = "wake-"
SEND_TIMEOUT_SECONDS = 5.0
EXIT_FLUSH_SECONDS = 3.0
WAKER_ATTRIBUTE = "consumer_waker"
"""The attribute of an engine that holds its ``Waker`` (set by ``attach``)."""


@dataclass(frozen=True)
class Target:
    """Where a process's wake-ups go: a Pub/Sub topic, or (local mode) the server's /push."""

    topic: str = ""
    url: str = ""
    window_seconds: float = 0.05
    secret: str = field(default="", repr=False)
    """What its wake-ups are signed with (``CONSUMER_SIGNING_SECRETS``' first)."""
    answer_seconds: float = 60.0
    """How long a local wake-up waits for the sweep's answer: the ack deadline."""

    @classmethod
    def of(cls, settings: Settings) -> Target | None:
        """None when there is nowhere to wake, or when the wake-up could not be honoured: it
        must be signed and this process has no secret."""
        jobs, secret = settings.jobs, settings.admission.signing_secret
        url = jobs.wake_url if settings.local_mode and not jobs.wake_topic else ""
        if not (jobs.wake_topic or url):
            return None
        if not (secret or admission.permissive(settings)):
            log.warning("no wake-ups: CONSUMER_SIGNING_SECRETS is not set, so none is honoured")
            return None
        ack_deadline = float(settings.inbox.ack_deadline_seconds)
        return cls(jobs.wake_topic, url, jobs.wake_window_ms / 1000, secret, ack_deadline)


def attach(engine: Engine, settings: Settings) -> None:
    """Enqueues on ``engine`` wake the target of ``settings`` (none: they wake nobody). Attaching
    the same target again keeps the engine's sender."""
    target, waker = Target.of(settings), waker_of(engine)
    if waker is None or waker.target != target:
        setattr(engine, WAKER_ATTRIBUTE, None if target is None else Waker(target))


def waker_of(engine: Engine) -> Waker | None:
    """Where enqueues on ``engine`` wake: None if nobody attached it, or its settings wake none."""
    waker: Waker | None = getattr(engine, WAKER_ATTRIBUTE, None)
    return waker


def committed(engine: Engine) -> None:
    """An enqueue on ``engine`` has committed: wake a sweeper (returns at once)."""
    if (waker := waker_of(engine)) is not None:
        waker.request()


def on_commit(connection: Connection) -> None:
    """Wake once the caller's transaction on ``connection`` commits (none if it rolls back).
    SQLAlchemy's ``commit`` event comes just before the commit itself, so this request waits
    one window first: the sweep it starts then sees the jobs."""
    waker = waker_of(connection.engine)
    if waker is None:
        return
    event.listen(connection, "commit", lambda _conn: waker.request(deferred=True), once=True)


def flush(engine: Engine, timeout: float) -> None:
    """Wait up to ``timeout`` for the wake-ups requested on ``engine`` to be sent."""
    if (waker := waker_of(engine)) is not None:
        waker.flush(timeout)


class Waker:
    """An engine's target and this process's sender for it: started on the first request, and
    again in a forked child (threads do not survive a fork), which also waits at exit for its
    last wake-up."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._sender: Sender | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def request(self, deferred: bool = False) -> None:
        self.sender().request(deferred)

    def sender(self) -> Sender:
        with self._lock:
            if self._sender is None or self._pid != os.getpid():
                self._sender, self._pid = Sender(self.target), os.getpid()
                atexit.register(self.flush, EXIT_FLUSH_SECONDS)
            return self._sender

    def flush(self, timeout: float) -> None:
        """Wait up to ``timeout`` for this process's requested wake-ups to be sent."""
        with self._lock:
            sender = self._sender if self._pid == os.getpid() else None
        if sender is not None:
            sender.wait_sent(timeout)


class Sender:
    """One daemon thread sending a target's wake-ups, at most one per window."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._due = threading.Event()
        self._state = threading.Condition()
        self._requested = self._sent = 0
        self._deferred = False
        self._session = deadline_session()  # used by the sender's thread only
        threading.Thread(target=self._run, name="wake-sender", daemon=True).start()

    def request(self, deferred: bool = False) -> None:
        with self._state:
            self._requested += 1
            self._deferred |= deferred
        self._due.set()

    def wait_sent(self, timeout: float) -> None:
        with self._state:
            wanted = self._requested
            self._state.wait_for(lambda: self._sent >= wanted, max(timeout, 0))

    def _run(self) -> None:
        while True:
            self._due.wait()
            with self._state:
                deferred, self._deferred = self._deferred, False
            if deferred:
                time.sleep(self.target.window_seconds)
            with self._state:  # every request made until now is served by this send
                self._due.clear()
                serving = self._requested
            self._send()
            with self._state:
                self._sent = serving
                self._state.notify_all()
            time.sleep(self.target.window_seconds)

    def _send(self) -> None:
        wake_id = PREFIX + uuid.uuid4().hex
        attributes = signed.sign(b"", {"task": TASK, "continuation": wake_id}, self.target.secret)
        try:
            if self.target.topic:
                client = continuation.publisher()
                future = client.publish(self.target.topic, b"", **attributes)
                future.result(timeout=SEND_TIMEOUT_SECONDS)
            else:
                # The answer comes when the sweep is done: wait for it, later wake-ups queue.
                body = wrapped_body(attributes=attributes)
                timeout = (SEND_TIMEOUT_SECONDS, self.target.answer_seconds)
                with Deadline(time.monotonic() + self.target.answer_seconds):
                    self._session.post(self.target.url, json=body, timeout=timeout).close()
        except Exception as exc:  # best effort: the scheduled tick catches up
            log.warning("wake-up not sent to %s: %s", self.target.topic or self.target.url, exc)
