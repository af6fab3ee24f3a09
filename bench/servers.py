"""The two ways the service has been served, started the same way for a fair comparison:

- ``asyncio``: today's ``consumer serve`` (gunicorn's asyncio worker, the buffering bridge).
- ``sync``: the previous command, gunicorn's sync workers serving ``consumer.http.wsgi:app()`` with
  ``--timeout`` = the ack deadline (what the image ran before).

Both run in local mode on loopback, on a fresh migrated database (``--database``: a PostgreSQL
admin DSN, or SQLite in a temporary directory), stopped by PID at the end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import requests

from bench.support.postgres import migrated_postgres_database
from bench.support.serving import free_port
from consumer.db.migrate import upgrade

KINDS = ("sync", "asyncio")


@contextlib.contextmanager
def database(admin_dsn: str | None) -> Iterator[str]:
    if admin_dsn:
        with migrated_postgres_database(admin_dsn, prefix="consumer_bench") as url:
            yield url
        return
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{directory}/bench.db"
        upgrade(url)
        yield url


def command(kind: str, port: int, workers: int) -> list[str]:
    if kind == "sync":
        return [
            sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}",
            "--workers", str(workers), "--timeout", "60", "--graceful-timeout", "60",
            "--no-control-socket", "consumer.http.wsgi:app()",
        ]  # fmt: skip
    return [
        sys.executable, "-m", "consumer", "serve", "--local", "--tick-seconds", "0",
        "--bind", f"127.0.0.1:{port}", "--workers", str(workers),
    ]  # fmt: skip


@contextlib.contextmanager
def server(kind: str, database_url: str, workers: int = 2) -> Iterator[tuple[str, int]]:
    """``(base URL, port)`` of a running server of ``kind``."""
    port = free_port()
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("CONSUMER_")}
    env = {**inherited, "CONSUMER_DATABASE_URL": database_url, "CONSUMER_LOCAL_MODE": "true",
           "CONSUMER_LOG_LEVEL": "WARNING"}  # fmt: skip
    process = subprocess.Popen(
        command(kind, port, workers), env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, process)
        yield base, port
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(base: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited with {process.returncode}")
        with contextlib.suppress(requests.RequestException):
            if requests.get(f"{base}/healthz", timeout=2).ok:
                return
        time.sleep(0.2)
    raise SystemExit("the server did not start")
