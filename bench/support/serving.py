"""Real gunicorn servers on loopback, started and stopped by PID, and the environment that makes
a server process build given settings."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import IO, Any

import requests

from consumer.config.settings import Settings
from consumer.demo.processes import descendants


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


PRODUCTION = "production"
"""``Server(worker=...)``: the container's command, gunicorn's asyncio worker
(``consumer.http.worker``)
configured by ``consumer.http.gunicorn_conf``; any other value is a gunicorn ``--worker-class``."""


class Server:
    """A real gunicorn process on loopback, stopped by PID. Its output goes to ``output`` when
    given (read it with ``text()``), else to the test's own."""

    def __init__(
        self,
        env: dict[str, str],
        workers: int = 2,
        app: str | None = None,
        worker: str = PRODUCTION,
        options: tuple[str, ...] = (),
        output: Path | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.output = output
        command = gunicorn_command(self.port, workers, app, worker, options, env)
        self.process = _spawn(command, server_env(env), output)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def text(self) -> str:
        return self.output.read_text(errors="replace") if self.output else ""

    def _wait_ready(self) -> None:
        try:
            wait_ready(f"{self.url}/healthz", self.process)
        except RuntimeError as error:
            raise RuntimeError(f"{error}\n{self.text()}") from None

    def stop(self) -> None:
        stop_process(self.process)


def stop_process(
    process: subprocess.Popen[Any], stop: int = signal.SIGTERM, timeout: float = 15
) -> None:
    """Stop a server the test started, by its PID: send ``stop``; if it has not exited after
    ``timeout`` seconds, SIGKILL it and every process it forked, so a hung server (or a worker
    stuck in a handler) never outlives the test."""
    if process.poll() is None:
        process.send_signal(stop)
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=timeout)
    if process.poll() is None:
        forked = descendants(process.pid)  # read while they are still its children
        process.kill()
        for pid in forked:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait()


def gunicorn_command(
    port: int,
    workers: int = 2,
    app: str | None = None,
    worker: str = PRODUCTION,
    options: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> list[str]:
    """The command ``Server`` runs (production: the container's, with ``--bind`` and
    ``--workers`` on top of the configuration's)."""
    if app is None:
        app = "consumer.http.wsgi:asgi()" if worker == PRODUCTION else "consumer.http.wsgi:app()"
    return [
        sys.executable, "-m", "gunicorn", *_worker_options(worker, env or {}), *options,
        "--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--no-control-socket", app,
    ]  # fmt: skip


def wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Until ``url`` answers 2xx; ``RuntimeError`` if ``process`` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        try:
            if requests.get(url, timeout=5).ok:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the server did not answer {url} in {timeout:g} s")


def wait_until(condition: Callable[[], bool], timeout: float = 60, every: float = 0.3) -> None:
    """Until ``condition()`` holds; a connection error while a server starts counts as not yet."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (requests.RequestException, OSError):
            pass
        time.sleep(every)
    raise AssertionError("condition not met in time")


def _worker_options(worker: str, env: dict[str, str]) -> list[str]:
    if worker == PRODUCTION:
        return ["--config", "python:consumer.http.gunicorn_conf"]
    timeout = env.get("CONSUMER_ACK_DEADLINE_SECONDS", "60")
    return ["--worker-class", worker, "--timeout", timeout]


def _spawn(command: list[str], env: dict[str, str], output: Path | None) -> subprocess.Popen[bytes]:
    sink: IO[bytes] | None = output.open("wb") if output else None
    try:
        return subprocess.Popen(command, env=env, stdout=sink, stderr=sink and subprocess.STDOUT)
    finally:
        if sink:
            sink.close()


TEST_SOURCES = "consumer-push=tick+storage+deploy+job+other"
"""What the pushes of ``wrapped_body`` (subscription ``consumer-push``) may start outside local
mode when a test declares no sources: everything, as before sources were declared."""
TEST_SIGNING_SECRET = "test-signing-secret-0123456789"


def server_env(env: dict[str, str]) -> dict[str, str]:
    """The test's ``CONSUMER_*`` variables only (none leak in from the runner); outside local
    mode a serving process refuses to start without an SMTP host, declared sources and a signing
    secret, so defaults are given (a test's own values win)."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("CONSUMER_")}
    if env.get("CONSUMER_LOCAL_MODE") != "true":
        inherited["CONSUMER_SMTP_HOST"] = "127.0.0.1"
        inherited["CONSUMER_SOURCES"] = TEST_SOURCES
        inherited["CONSUMER_SIGNING_SECRETS"] = TEST_SIGNING_SECRET
    return {**inherited, **env}


def settings_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment that makes a server process build ``settings``."""
    env = {
        "CONSUMER_DATABASE_URL": settings.database_url,
        "CONSUMER_LOCAL_MODE": "true" if settings.local_mode else "false",
        "CONSUMER_ACK_DEADLINE_SECONDS": str(settings.inbox.ack_deadline_seconds),
        "CONSUMER_SAFETY_MARGIN_SECONDS": str(settings.inbox.safety_margin_seconds),
        "CONSUMER_MAX_ATTEMPTS": str(settings.inbox.max_attempts),
        "CONSUMER_LOG_LEVEL": "WARNING",
    }
    if settings.plugins:
        env["CONSUMER_PLUGINS"] = ",".join(settings.plugins)
    env.update(extra)
    return env
