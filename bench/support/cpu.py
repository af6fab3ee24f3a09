"""CPU time of the processes a benchmark drives, read from ``/proc``: the servers' workers and
the PostgreSQL backends. On a shared machine CPU per unit of work is steadier than any rate."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (a gunicorn arbiter's workers)."""
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


def backends(conninfo: str, application: str | None = None, but: str | None = None) -> list[int]:
    """The PostgreSQL backends connected to ``conninfo``'s database (this one excepted); only
    those whose ``application_name`` is ``application`` when given, and not ``but``."""
    query = "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> %s"
    values: tuple[object, ...] = ()
    if application is not None:
        query, values = query + " AND application_name = %s", (application,)
    if but is not None:
        query, values = query + " AND application_name <> %s", (*values, but)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        rows = connection.execute(query, (connection.info.backend_pid, *values)).fetchall()
    return [row[0] for row in rows]


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU seconds of each process still alive (``/proc/PID/stat``)."""
    seconds: dict[int, float] = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return seconds


def spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds spent between two readings (a process absent before started from zero)."""
    return sum(value - before.get(pid, 0.0) for pid, value in after.items())
