"""A gunicorn process whose output the test reads (the shared ``Server`` does not capture it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

from tests.conftest import free_port


@dataclass
class Gunicorn:
    url: str
    output: Path
    process: subprocess.Popen[bytes]

    def text(self) -> str:
        return self.output.read_text(errors="replace")


def command(port: int, *options: str, workers: int = 1) -> list[str]:
    return [
        sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}",
        "--workers", str(workers), "--no-control-socket", *options, "consumer.wsgi:app()",
    ]  # fmt: skip


def clean_env(env: dict[str, str]) -> dict[str, str]:
    """The test's CONSUMER_* variables only: none leak in from the runner (TESTS_*)."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("CONSUMER_")}
    # Outside local mode a serving process refuses to start without an SMTP host.
    return {**inherited, "CONSUMER_SMTP_HOST": "127.0.0.1", **env}


@contextmanager
def gunicorn(
    env: dict[str, str], output: Path, *options: str, workers: int = 1
) -> Iterator[Gunicorn]:
    """Start gunicorn, wait for /healthz, and stop it by PID afterwards."""
    port = free_port()
    with output.open("wb") as sink:
        process = subprocess.Popen(
            command(port, *options, workers=workers),
            env=clean_env(env),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    server = Gunicorn(f"http://127.0.0.1:{port}", output, process)
    try:
        _wait_ready(server)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(server: Gunicorn, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"gunicorn exited early:\n{server.text()}")
        try:
            if requests.get(f"{server.url}/healthz", timeout=5).ok:
                return
        except requests.RequestException:
            time.sleep(0.1)
    raise RuntimeError("gunicorn did not become ready")
