"""Shared fixtures: real databases (a fresh SQLite file, a fresh PostgreSQL database per test)
and a real gunicorn server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import hypothesis
import psycopg
import pytest
import requests
from sqlalchemy import Engine

from consumer.db.engine import make_engine
from consumer.db.migrate import upgrade
from consumer.settings import Settings

# CI explores the same generated cases every run (a new random failure would block a landing
# for reasons unrelated to the change); developers' runs keep exploring new ones.
hypothesis.settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    hypothesis.settings.load_profile("ci")

PG_ADMIN_DSN = os.environ.get("TESTS_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
REQUIRE_POSTGRES = os.environ.get("TESTS_REQUIRE_POSTGRES") == "1"


def _postgres_available() -> bool:
    try:
        with psycopg.connect(PG_ADMIN_DSN, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


@pytest.fixture(scope="session")
def postgres_admin() -> str:
    if not _postgres_available():
        if REQUIRE_POSTGRES:
            pytest.fail(f"PostgreSQL is required but unreachable at {PG_ADMIN_DSN}")
        pytest.skip(f"PostgreSQL unreachable at {PG_ADMIN_DSN}")
    return PG_ADMIN_DSN


@contextmanager
def migrated_postgres_database(admin_dsn: str, prefix: str = "consumer_test") -> Iterator[str]:
    """Create a uniquely named database, migrate it, yield its URL, drop it."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base = admin_dsn.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    url = f"{base}/{name}"
    try:
        upgrade(url)
        yield url
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_url(postgres_admin: str) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for one test, dropped afterwards."""
    with migrated_postgres_database(postgres_admin) as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'consumer.db'}"
    upgrade(url)
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    """Runs the test once on SQLite and once on PostgreSQL."""
    fixture = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    return str(request.getfixturevalue(fixture))


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, local_mode=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A real gunicorn process serving ``consumer.wsgi:app()`` on loopback."""

    def __init__(self, env: dict[str, str], workers: int = 2, app: str = "consumer.wsgi:app()"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [
            sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{self.port}",
            "--workers", str(workers), "--timeout", env.get("CONSUMER_ACK_DEADLINE_SECONDS", "60"),
            "--no-control-socket", app,
        ]  # fmt: skip
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("CONSUMER_")}
        self.process = subprocess.Popen(command, env={**inherited, **env})
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {self.process.returncode}")
            try:
                if requests.get(f"{self.url}/healthz", timeout=10).ok:
                    return
            except requests.RequestException:
                time.sleep(0.1)
        raise RuntimeError("gunicorn did not become ready")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def start_server() -> Iterator[Callable[..., Server]]:
    """Start gunicorn servers with the given ``CONSUMER_*`` environment; stopped by PID after."""
    servers: list[Server] = []

    def start(env: dict[str, str], **kwargs: Any) -> Server:
        server = Server(env, **kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


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


def with_settings(settings: Settings, **changes: Any) -> Settings:
    return settings.with_values(**changes)
