"""The faults of a chaos run, played from the plan (``bench.chaos.plan``) by one thread per
family. A pod is the subject of one fault at a time (a kill never meets a pause of the same pod).

Every fault is recorded with its window (wall-clock seconds, comparable with the database's
timestamps: a pause from SIGSTOP to SIGCONT) and, for a kill or a pod's pause, the jobs the pod's
frozen or killed processes held at that moment."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from bench.chaos.cluster import Cluster
from bench.chaos.plan import Planned
from bench.chaos.pods import Pods
from bench.chaos.sinks import Target, TimedRecorder

HELD = text("SELECT id, claimed_by FROM jobs WHERE status = 'running'")
CLAIMED = text("SELECT key FROM inbox WHERE status = 'running' AND key NOT LIKE '%:continuation:%'")
RESTART_DELAY_SECONDS = 1.0
HELD_TRIES = 6


@dataclass
class Fault:
    kind: str
    name: str
    start: float
    end: float = 0.0
    held_jobs: frozenset[int] | None = None
    """For a kill or a pause: the running jobs claimed by the pod's killed or frozen processes
    (None: unknown)."""
    held_events: frozenset[str] = frozenset()
    """For a kill or a pause: every inbox row running at that moment (an inbox claim does not
    say which pod holds it, so this includes the live pods' claims, which finish within
    moments)."""


@dataclass
class Chaos:
    """Plays the plan against the running system; ``faults`` is what happened."""

    pods: Pods
    cluster: Cluster
    target: Target
    mail: TimedRecorder
    ledger_engine: Engine
    rng: random.Random
    progress: Callable[[str], None]
    faults: list[Fault] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _busy: set[int] = field(default_factory=set)
    """Pods a kill or a pause is playing on."""
    _restarts: int = 0
    _pauses: int = 0

    def start(self, families: list[list[Planned]], started: float) -> None:
        for family in families:
            thread = threading.Thread(target=self._play, args=(family, started), daemon=True)
            self._threads.append(thread)
            thread.start()

    def stop(self) -> None:
        """Ends the plan; a fault in progress is allowed to finish (and heal)."""
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=120)

    def _play(self, family: list[Planned], started: float) -> None:
        for planned in family:
            if self._stopping.wait(max(0.0, started + planned.at - time.time())):
                return
            fault = Fault(planned.kind, f"{planned.kind} #{self._count(planned.kind) + 1}",
                          time.time())  # fmt: skip
            try:
                self._make(fault, planned)
            except Exception as exc:  # a fault that could not be made is reported, not hidden
                fault.name += f" (failed: {type(exc).__name__}: {str(exc).splitlines()[0]})"
            fault.end = fault.end or time.time()
            with self.lock:
                self.faults.append(fault)
            self.progress(f"{fault.name}: {fault.end - fault.start:.1f} s")

    def record(self, fault: Fault) -> None:
        """A fault nobody planned (``bench.chaos.watch``), for the ledger."""
        with self.lock:
            self.faults.append(fault)
        self.progress(f"{fault.name}")

    def _count(self, kind: str) -> int:
        with self.lock:
            return sum(1 for fault in self.faults if fault.kind == kind)

    def _make(self, fault: Fault, planned: Planned) -> None:
        makers = {"kill": self._kill, "pod-pause": self._pause, "pg-restart": self._restart,
                  "db-cut": self._cut, "db-pause": self._hold}  # fmt: skip
        makers.get(planned.kind, self._spell)(fault, planned)

    @contextmanager
    def _a_pod(self) -> Iterator[int]:
        """A random pod no other fault is playing on, for the block."""
        with self.lock:
            index = self.rng.choice([n for n in range(len(self.pods.ports)) if n not in self._busy])
            self._busy.add(index)
        try:
            yield index
        finally:
            with self.lock:
                self._busy.discard(index)

    def _kill(self, fault: Fault, _: Planned) -> None:
        with self._a_pod() as index:
            fault.name += f" (pod-{index + 1})"
            pids = self.pods.kill(index)
            fault.start = time.time()
            fault.held_jobs, fault.held_events = held_by(self.ledger_engine, pids)
            fault.end = fault.start  # the crash is the fault; the restart is recovery
            time.sleep(RESTART_DELAY_SECONDS)
            self.pods.start(index)

    def _pause(self, fault: Fault, planned: Planned) -> None:
        """The whole pod (odd pauses) or one of its workers (even ones), frozen: gunicorn's
        arbiter ends a frozen worker that misses its heartbeat (``WORKER TIMEOUT``); a frozen
        pod resumes with its arbiter after its claims were taken over."""
        with self._a_pod() as index:
            self._pauses += 1
            workers = sorted(self.pods.workers(index))
            worker = None if self._pauses % 2 or not workers else self.rng.choice(workers)
            fault.name += f" (pod-{index + 1}, " + (f"worker {worker})" if worker else "whole pod)")
            frozen = self.pods.freeze(index, worker)
            fault.start = time.time()
            try:
                fault.held_jobs, fault.held_events = held_by(self.ledger_engine, frozen)
                time.sleep(max(0.0, fault.start + planned.seconds - time.time()))
            finally:
                self.pods.thaw(index)
            fault.end = time.time()

    def _restart(self, fault: Fault, _: Planned) -> None:
        self._restarts += 1
        mode = "fast" if self._restarts % 2 else "immediate"
        fault.name += f" ({mode})"
        self.cluster.restart(mode)

    def _cut(self, _: Fault, planned: Planned) -> None:
        self.cluster.proxy.stop()
        try:
            time.sleep(planned.seconds)
        finally:
            self.cluster.proxy.start()

    def _hold(self, _: Fault, planned: Planned) -> None:
        """Every byte through the proxy held; the pods' sessions stay open, their statements
        and commits wait (and the workers whose requests outlive the deadline exit)."""
        self.cluster.proxy.pause()
        try:
            time.sleep(planned.seconds)
        finally:
            self.cluster.proxy.resume()

    def _spell(self, fault: Fault, planned: Planned) -> None:
        """The window lasts until the answers stalled by the spell have landed."""
        family, mode = fault.kind.split("-", 1)
        sink: Target | TimedRecorder = self.target if family == "target" else self.mail
        sink.spell(mode)
        try:
            time.sleep(planned.seconds)
        finally:
            sink.heal()
        fault.end = time.time() + (sink.stall_seconds if mode == "stall" else 0.0)


def held_by(engine: Engine, pids: set[int]) -> tuple[frozenset[int] | None, frozenset[str]]:
    """Running jobs claimed by these processes (a claim token is ``host/PID/random``) and the
    running inbox rows, asked a few times within a couple of seconds (well inside their leases:
    nobody can take them over meanwhile); None when the database cannot say (it was restarted
    a moment ago)."""
    for _ in range(HELD_TRIES):
        with suppress(SQLAlchemyError):
            with engine.connect() as connection:
                rows = connection.execute(HELD).all()
                keys = frozenset(connection.execute(CLAIMED).scalars())
            return frozenset(row.id for row in rows if _pid(row.claimed_by) in pids), keys
        time.sleep(0.3)
    return None, frozenset()


def _pid(token: str | None) -> int:
    parts = (token or "").split("/")
    return int(parts[-2]) if len(parts) >= 3 and parts[-2].isdigit() else -1
