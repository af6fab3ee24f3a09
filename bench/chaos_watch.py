"""Crashes nobody planned: a pod's worker that sees a request outlive the ack deadline exits on
purpose (``consumer.http.worker``), which on a starved machine happens mid-sweep. The watcher
reads the pods' logs as they grow and records each such exit as an observed fault, with the
jobs that worker still held (asked at once, while their leases run), so the ledger can name it
as the cause of the repeats it leaves behind."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from sqlalchemy import Engine

from bench.chaos_faults import Fault, held_by

EXIT_MESSAGE = "a request outlived the ack deadline"
SCAN_SECONDS = 0.5


class ExitWatcher:
    """``start()``; every exit found is handed to ``record``."""

    def __init__(self, workdir: Path, engine: Engine, record: Callable[[Fault], None]) -> None:
        self.workdir, self.engine, self.record = workdir, engine, record
        self._offsets: dict[Path, int] = {}
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
        for log in sorted(self.workdir.glob("pod-*.log")):
            for line in self._new_lines(log):
                if EXIT_MESSAGE in line:
                    self._exited(log, line)

    def _new_lines(self, log: Path) -> list[str]:
        start = self._offsets.get(log, 0)
        with log.open("rb") as stream:
            stream.seek(start)
            data = stream.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._offsets[log] = start + len(complete)
        return complete.decode(errors="replace").splitlines()

    def _exited(self, log: Path, line: str) -> None:
        try:
            entry = json.loads(line)
            at = datetime.fromisoformat(entry["time"].replace("Z", "+00:00")).timestamp()
            pid = int(entry["pid"])
        except (ValueError, KeyError, TypeError):
            return
        self._count += 1
        pod = log.name.split(".")[0]
        fault = Fault("worker-exit", f"worker-exit #{self._count} ({pod}, observed)", at, at)
        fault.held_jobs, fault.held_events = held_by(self.engine, {pid})
        self.record(fault)
