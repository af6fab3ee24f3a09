"""Crashes nobody planned: every death of a pod's worker that the harness did not cause by
killing its pod, read from the pods' logs as they grow (the arbiter and its workers write the
same log):

- the worker's own exit when a request outlived the ack deadline (``consumer.http.worker``),
  which a starved machine or a database pause provokes mid-sweep;
- gunicorn's ``WORKER TIMEOUT (pid:N)`` (CRITICAL), for a worker that stopped beating (a frozen
  one), which the arbiter then aborts and SIGKILLs;
- gunicorn's ``Worker (pid:N) was sent SIGKILL!`` (or another signal but SIGTERM, a clean stop)
  and ``Worker (pid:N) exited with code N.``, whoever sent or caused it.

The lines of one death (the watchdog's and the arbiter's exit code, a timeout and its SIGKILL)
are one fault: a PID seen again in the same pod within ``SAME_DEATH_SECONDS`` is the same death.
Each is recorded with the jobs that worker still held (asked at once, while their leases run),
so the ledger can name it as the cause of the repeats it leaves behind."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from bench.chaos.faults import Fault, held_by

WATCHDOG = "a request outlived the ack deadline"
DEATHS = (
    (re.compile(r"WORKER TIMEOUT \(pid:(\d+)\)"), "WORKER TIMEOUT"),
    (re.compile(r"Worker \(pid:(\d+)\) was sent (SIG(?!TERM\b)\w+)"), "{1}"),
    (re.compile(r"Worker \(pid:(\d+)\) exited with code (\d+)"), "exit code {1}"),
)
"""gunicorn's lines: the worker's PID, and how it died (from the match's groups)."""
SAME_DEATH_SECONDS = 30.0
SCAN_SECONDS = 0.5


def death(entry: dict[str, Any]) -> tuple[int, str] | None:
    """``(pid, how)`` for a log entry that tells of a worker's death, else ``None``."""
    message = str(entry.get("message", ""))
    if WATCHDOG in message:
        return int(entry["pid"]), "watchdog"
    for pattern, how in DEATHS:
        if match := pattern.search(message):
            return int(match.group(1)), how.format(*match.groups())
    return None


class ExitWatcher:
    """``start()``; every exit found is handed to ``record``."""

    def __init__(self, workdir: Path, engine: Engine, record: Callable[[Fault], None]) -> None:
        self.workdir, self.engine, self.record = workdir, engine, record
        self._offsets: dict[Path, int] = {}
        self._seen: dict[tuple[str, int], float] = {}
        """``(pod, pid)`` -> when that worker's death was last seen."""
        self._count = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-exits", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=30)
        self._scan()  # the last lines, written before the run ended

    def _run(self) -> None:
        while not self._stopping.wait(SCAN_SECONDS):
            self._scan()

    def _scan(self) -> None:
        """Deaths are numbered in the order they happened, whichever pod's log told of them."""
        found = [death for log in sorted(self.workdir.glob("pod-*.log"))
                 for line in self._new_lines(log)
                 if (death := self._read(log.name.split(".")[0], line))]  # fmt: skip
        for pod, pid, how, at in sorted(found, key=lambda death: death[3]):
            self._died(pod, pid, how, at)

    def _new_lines(self, log: Path) -> list[str]:
        start = self._offsets.get(log, 0)
        with log.open("rb") as stream:
            stream.seek(start)
            data = stream.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._offsets[log] = start + len(complete)
        return complete.decode(errors="replace").splitlines()

    def _read(self, pod: str, line: str) -> tuple[str, int, str, float] | None:
        """``(pod, pid, how, when)`` for a line that tells of a death not yet seen."""
        try:
            entry = json.loads(line)
            found = death(entry)
            at = datetime.fromisoformat(entry["time"].replace("Z", "+00:00")).timestamp()
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        if found is None:
            return None
        pid, how = found
        last, self._seen[(pod, pid)] = self._seen.get((pod, pid)), at
        fresh = last is None or at - last > SAME_DEATH_SECONDS
        return (pod, pid, how, at) if fresh else None

    def _died(self, pod: str, pid: int, how: str, at: float) -> None:
        self._count += 1
        name = f"worker-exit #{self._count} ({pod}, observed: {how})"
        fault = Fault("worker-exit", name, at, at)
        fault.held_jobs, fault.held_events = held_by(self.engine, {pid})
        self.record(fault)
