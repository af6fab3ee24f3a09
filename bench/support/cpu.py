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


def backends_of(conninfo: str, client: int) -> list[int]:
    """The PostgreSQL backends connected to ``conninfo``'s database from process ``client``: a
    backend's ``client_port`` is matched against the local ports of the client's TCP sockets
    (so loopback TCP connections only; a Unix-socket client matches nothing)."""
    ports = local_ports(client)
    query = (
        "SELECT pid, client_port FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    with psycopg.connect(conninfo, autocommit=True) as connection:
        rows = connection.execute(query).fetchall()
    return [pid for pid, port in rows if port in ports]


def local_ports(pid: int) -> set[int]:
    """The local ports of the TCP sockets (IPv4 and IPv6) process ``pid`` holds open."""
    inodes: set[str] = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed since the listing
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports: set[int] = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


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
