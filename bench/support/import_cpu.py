"""One import's CPU, as ``bench/storage_bench.py`` counts it on each side, and its report lines.

The in-memory floor: one process and its one backend. End to end, and the same-trip floor: the
gunicorn worker that imported the file (all its threads) and the backends connected to it (told
apart by their client's TCP port); the other worker and every other backend are measured and
left out (``E2E.left_out``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from bench.support.cpu import backends_of, children, cpu_seconds, spent

QUIET_SECONDS = 0.3
IDLE_CPU_SECONDS = 0.02


class Floor(NamedTuple):
    """One run of the floor: seconds, and CPU seconds of this process and of its backend."""

    seconds: float
    client: float
    backend: float

    @property
    def cpu(self) -> float:
        return self.client + self.backend


class E2E(NamedTuple):
    """One run through the emulators (the service's, or the same-trip floor's): seconds and CPU
    seconds (see the module's docstring for what is counted, and what is measured but left
    out)."""

    seconds: float
    """From the upload call to the recorded finish (``processed_files.finished_at``)."""
    handler: float
    """The handler's own seconds (the file's ``duration_ms``; the floor's, from its download
    to its commit)."""
    worker: float
    """CPU of the gunicorn worker that imported the file (all its threads)."""
    backends: float
    """CPU of the database backends that worker is connected to."""
    left_out: float
    """CPU of the other worker and of every other backend but the bench's poller."""
    parts: dict[str, float]
    """Where the seconds went, in order (``bench.support.import_trip``), and the poll after."""

    @property
    def cpu(self) -> float:
        return self.worker + self.backends


class Run(Protocol):
    """A floor's run or an end-to-end one, as the last line reads them."""

    @property
    def seconds(self) -> float: ...

    @property
    def cpu(self) -> float: ...


def booted(arbiter: int, count: int, timeout: float = 60) -> list[int]:
    """The arbiter's workers once all ``count`` are forked and done booting (their CPU about
    still for ``QUIET_SECONDS``): the server answers once one worker does, and a worker forked
    after the reading would import the file uncounted (seen: 0 us/row for the worker), or
    boot beside the import."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = children(arbiter)
        before = cpu_seconds(workers)
        time.sleep(QUIET_SECONDS)
        if len(workers) == count and spent(before, cpu_seconds(workers)) < IDLE_CPU_SECONDS:
            return workers
    raise TimeoutError(f"gunicorn did not settle with {count} booted workers")


Readings = tuple[dict[int, float], dict[int, float]]
"""CPU seconds by PID: the gunicorn workers', the database backends'."""


def cpu_of(conninfo: str, before: Readings, after: Readings) -> tuple[float, float, float]:
    """CPU seconds of the importing worker, of its backends and of the rest: the worker that
    spent the most CPU is the one that imported the file (the other one only answered health
    checks); its backends are told apart by their client's TCP port."""
    worker_cpu = {pid: spent(before[0], {pid: cpu}) for pid, cpu in after[0].items()}
    importer = max(worker_cpu, key=worker_cpu.__getitem__)
    mine = set(backends_of(conninfo, importer))
    db_cpu = {pid: spent(before[1], {pid: cpu}) for pid, cpu in after[1].items()}
    backends_cpu = sum(cpu for pid, cpu in db_cpu.items() if pid in mine)
    left_out = sum(worker_cpu.values()) - worker_cpu[importer]
    left_out += sum(db_cpu.values()) - backends_cpu
    return worker_cpu[importer], backends_cpu, left_out


def cpu_line(rows: int, floor: list[Floor], trip: list[E2E], e2e: list[E2E]) -> str:
    """Each side's CPU per row in its parts, medians of the runs, and what the runs through
    gunicorn left out."""

    def us(runs: list[Any], part: str) -> float:
        return statistics.median(getattr(run, part) for run in runs) * 1e6 / rows

    def served(label: str, runs: list[E2E]) -> str:
        return (f"{label} worker {us(runs, 'worker'):.1f} + its backends "
                f"{us(runs, 'backends'):.1f} (left out: {us(runs, 'left_out'):.1f})")  # fmt: skip

    return (
        f"cpu us/row: {served('e2e importing', e2e)}; {served('same-trip floor', trip)}; "
        f"in-memory floor client {us(floor, 'client'):.1f} + backend {us(floor, 'backend'):.1f}"
    )


def import_line(rows: int, floor: Sequence[Run], e2e: Sequence[Run]) -> str:
    """The last line: e2e beside the floor, rate and CPU per row, medians of the runs."""
    floor_rate = rows / statistics.median(run.seconds for run in floor)
    e2e_rate = rows / statistics.median(run.seconds for run in e2e)
    floor_us = statistics.median(run.cpu for run in floor) * 1e6 / rows
    e2e_us = statistics.median(run.cpu for run in e2e) * 1e6 / rows
    ratio = e2e_rate / floor_rate
    return (f"import: e2e {e2e_rate:.0f} rows/s vs COPY {floor_rate:.0f} rows/s: {ratio:.2f} x; "
            f"cpu {e2e_us:.1f} us/row vs {floor_us:.1f} us/row")  # fmt: skip
