"""PostgreSQL as a cluster of its own for the chaos run, so it can be restarted without touching
the shared server: ``initdb`` into a temporary directory (trust auth, 127.0.0.1 only, its own
port), started and restarted with ``pg_ctl``, and a TCP proxy in front of it that the pods use,
so the harness can also cut every connection for a while, or hold every byte on every connection
(a pause: a frozen network path, the sessions stay open), with the server untouched."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from contextlib import suppress
from pathlib import Path

import psycopg

from bench.support.tcpproxy import TcpProxy
from consumer.demo.processes import free_port

BIN_GLOB = "/usr/lib/postgresql/*/bin"
SERVER_OPTIONS = (
    "-c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off "
    "-c shared_buffers=64MB -c log_min_messages=warning"
)
"""fsync is off: the cluster lives for one run on a shared machine; a restart (even an immediate
one, which makes PostgreSQL recover from its WAL) never loses the operating system's cache."""


def postgres_bin() -> Path | None:
    """The newest server's bin directory from the system's packages, or ``None``."""
    found = [Path(path) for path in glob.glob(BIN_GLOB) if (Path(path) / "initdb").exists()]
    return max(found, key=lambda path: int(path.parent.name), default=None)


class Cluster:
    """``with Cluster() as cluster:``; pods connect to ``cluster.proxied_url(name)``."""

    def __init__(self) -> None:
        bin_dir = postgres_bin()
        if bin_dir is None:
            raise RuntimeError(f"no PostgreSQL server binaries under {BIN_GLOB}")
        self.bin = bin_dir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="chaos-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.proxy = GatedProxy(self.port)
        self._user = _server_user()

    def __enter__(self) -> Cluster:
        try:
            self._initdb()
            self._pg_ctl("start", "-w", "-t", "60", "-o", self._options())
            self.proxy.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.proxy.stop()
        if (self.data / "postmaster.pid").exists():
            self._pg_ctl("stop", "-m", "immediate", check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def direct_dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def url(self, database: str, proxied: bool) -> str:
        """A SQLAlchemy URL for ``database``, through the proxy or straight to the server."""
        port = self.proxy.port if proxied else self.port
        return f"postgresql+psycopg://postgres@127.0.0.1:{port}/{database}"

    def create_database(self, name: str) -> None:
        with psycopg.connect(self.direct_dsn(), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')

    def restart(self, mode: str) -> None:
        """Stop (``fast``: sessions are ended; ``immediate``: a crash, recovered from the WAL)
        and start again; returns once the server accepts connections."""
        self._pg_ctl("stop", "-m", mode, "-w", "-t", "60")
        self._pg_ctl("start", "-w", "-t", "60", "-o", self._options())
        self.wait_ready()

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(self.direct_dsn(), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                time.sleep(0.1)
        raise RuntimeError(f"PostgreSQL did not come back:\n{self.tail()}")

    def tail(self, size: int = 2000) -> str:
        return self.log.read_text(errors="replace")[-size:] if self.log.exists() else ""

    def _options(self) -> str:
        return f"-p {self.port} -k {self.root} {SERVER_OPTIONS}"

    def _initdb(self) -> None:
        if self._user is not None:  # initdb refuses to run as root: the cluster is postgres'
            os.chown(self.root, self._user.pw_uid, self._user.pw_gid)
        command = [str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                   "--no-sync", "-E", "UTF8", "--locale", "C"]  # fmt: skip
        self._run(command)

    def _pg_ctl(self, *args: str, check: bool = True) -> None:
        command = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), *args]
        self._run(command, check)

    def _run(self, command: list[str], check: bool = True) -> None:
        user = self._user.pw_name if self._user is not None else None
        done = subprocess.run(command, user=user, capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"{command[0]} failed: {done.stdout}{done.stderr}\n{self.tail()}")


class GatedProxy(TcpProxy):
    """The test proxy with a gate: ``pause()`` holds every chunk in either direction (new
    connections are accepted, their first bytes held too) until ``resume()``, as a proxy that was
    SIGSTOPped would; nothing is cut or lost."""

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self._open = threading.Event()
        self._open.set()

    def pause(self) -> None:
        self._open.clear()

    def resume(self) -> None:
        self._open.set()

    def stop(self) -> None:
        self.resume()  # held chunks meet the cut, not a gate that never opens
        super().stop()

    def _pipe(self, source: socket.socket, sink: socket.socket, watched: bool) -> None:
        """``TcpProxy._pipe``, waiting at the gate before each chunk is passed on."""
        with suppress(OSError):
            while chunk := source.recv(65536):
                self._open.wait()
                if watched and self.watch is not None:
                    self.watch(chunk)
                sink.sendall(chunk)
        with suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def _server_user() -> pwd.struct_passwd | None:
    """``postgres`` when we are root (the server will not run as root), else ourselves."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError as exc:
        raise RuntimeError(
            "running as root, and there is no postgres user to own the cluster"
        ) from exc
