"""The faults of a chaos run, planned up front and played by one thread per family:

- ``kill``: SIGKILL a random pod every 15-30 s (scaled down for short runs), then start it again;
- ``pg-restart`` (at least two per run, alternately ``fast`` and ``immediate``) and ``db-cut``
  (every connection through the proxy cut for 1-10 s), never two at once;
- ``target-fail`` / ``target-stall`` and ``smtp-fail`` / ``smtp-stall``: short spells.

Every fault is recorded with its window (wall-clock seconds, comparable with the database's
timestamps) and, for a kill, the jobs the killed pod held at that moment."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from bench.chaos_cluster import Cluster
from bench.chaos_pods import Pods
from bench.chaos_sinks import Target, TimedRecorder

HELD = text("SELECT id, claimed_by FROM jobs WHERE status = 'running'")
CLAIMED = text("SELECT key FROM inbox WHERE status = 'running' AND key NOT LIKE '%:continuation:%'")
SPELL_SECONDS = (2.0, 5.0)
CUT_SECONDS = (1.0, 10.0)
KILL_EVERY = (15.0, 30.0)
RESTART_DELAY_SECONDS = 1.0
HELD_TRIES = 6


@dataclass
class Fault:
    kind: str
    name: str
    start: float
    end: float = 0.0
    held_jobs: frozenset[int] | None = None
    """For a kill: the running jobs claimed by the killed pod's workers (None: unknown)."""
    held_events: frozenset[str] = frozenset()
    """For a kill: every inbox row running at that moment (an inbox claim does not say which
    pod holds it, so this includes the live pods' claims, which finish within moments)."""


@dataclass(frozen=True)
class Planned:
    at: float
    """Seconds after the start of the run."""
    kind: str
    seconds: float = 0.0


@dataclass(frozen=True)
class Window:
    """Faults start between ``first`` and ``last`` seconds into a run of ``seconds``."""

    seconds: float
    first: float
    last: float

    @classmethod
    def of(cls, seconds: float) -> Window:
        return cls(seconds, min(10.0, seconds / 6), seconds - min(15.0, seconds / 6))


def plan(window: Window, rng: random.Random) -> list[list[Planned]]:
    """One list per family, each in time order."""
    return [_kills(window, rng), _database(window, rng), _spells(window, rng, "target"),
            _spells(window, rng, "smtp")]  # fmt: skip


def _kills(window: Window, rng: random.Random) -> list[Planned]:
    scale = min(1.0, window.seconds / 90)
    planned, at = [], window.first + rng.uniform(*KILL_EVERY) * scale / 2
    while at < window.last:
        planned.append(Planned(at, "kill"))
        at += rng.uniform(*KILL_EVERY) * scale
    return planned


def _database(window: Window, rng: random.Random) -> list[Planned]:
    """Evenly spread slots, each holding one restart or one cut at a random moment in it."""
    count = max(4, round(window.seconds / 30))
    kinds = ["pg-restart"] * max(2, count // 3)
    kinds += ["db-cut"] * (count - len(kinds))
    rng.shuffle(kinds)
    return _in_slots(window, rng, kinds, CUT_SECONDS)


def _spells(window: Window, rng: random.Random, family: str) -> list[Planned]:
    count = max(2, round(window.seconds / 60))
    kinds = [f"{family}-{'fail' if n % 2 == 0 else 'stall'}" for n in range(count)]
    return _in_slots(window, rng, kinds, SPELL_SECONDS)


def _in_slots(window: Window, rng: random.Random, kinds: list[str],
              lengths: tuple[float, float]) -> list[Planned]:  # fmt: skip
    slot = (window.last - window.first) / len(kinds)
    planned = []
    for n, kind in enumerate(kinds):
        seconds = rng.uniform(*lengths) if kind != "pg-restart" else 0.0
        room = max(0.0, slot - min(seconds, slot * 0.8))
        planned.append(Planned(window.first + n * slot + rng.uniform(0, room), kind, seconds))
    return planned


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
    _restarts: int = 0

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
        """A fault nobody planned (``bench.chaos_watch``), for the ledger."""
        with self.lock:
            self.faults.append(fault)
        self.progress(f"{fault.name}")

    def _count(self, kind: str) -> int:
        with self.lock:
            return sum(1 for fault in self.faults if fault.kind == kind)

    def _make(self, fault: Fault, planned: Planned) -> None:
        kind = planned.kind
        if kind == "kill":
            self._kill(fault)
        elif kind == "pg-restart":
            self._restarts += 1
            mode = "fast" if self._restarts % 2 else "immediate"
            fault.name += f" ({mode})"
            self.cluster.restart(mode)
        elif kind == "db-cut":
            self.cluster.proxy.stop()
            try:
                time.sleep(planned.seconds)
            finally:
                self.cluster.proxy.start()
        else:
            self._spell(fault, planned.seconds)

    def _kill(self, fault: Fault) -> None:
        index = self.rng.randrange(len(self.pods.ports))
        fault.name += f" (pod-{index + 1})"
        pids = self.pods.kill(index)
        fault.start = time.time()
        fault.held_jobs, fault.held_events = held_by(self.ledger_engine, pids)
        fault.end = fault.start  # the crash is the fault; the restart is recovery
        time.sleep(RESTART_DELAY_SECONDS)
        self.pods.start(index)

    def _spell(self, fault: Fault, seconds: float) -> None:
        """The window lasts until the answers stalled by the spell have landed."""
        family, mode = fault.kind.split("-", 1)
        sink: Target | TimedRecorder = self.target if family == "target" else self.mail
        sink.spell(mode)
        try:
            time.sleep(seconds)
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
