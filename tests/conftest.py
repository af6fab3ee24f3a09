"""Shared fixtures, defined once: real databases (a fresh SQLite file, a fresh PostgreSQL database
per test), the service's clock moved by hand, a test client of the app, and real gunicorn servers
(the production asyncio worker unless a test asks for another)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any

import hypothesis
import psycopg
import pytest
import requests
from flask.testing import FlaskClient
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.db.migrate import upgrade
from consumer.demo.processes import descendants
from consumer.http.app import create_app
from consumer.service import Service
from consumer.wire.timeutil import utcnow

# CI explores the same generated cases every run (a new random failure would block a landing
# for reasons unrelated to the change); developers' runs keep exploring new ones.
hypothesis.settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    hypothesis.settings.load_profile("ci")

PG_ADMIN_DSN = os.environ.get("TESTS_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
REQUIRE_POSTGRES = os.environ.get("TESTS_REQUIRE_POSTGRES") == "1"


class Rollback(Exception):
    """Raised inside the caller's transaction to roll it back."""


def _postgres_available() -> bool:
    try:
        with psycopg.connect(PG_ADMIN_DSN, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


PHASE = os.environ.get("TESTS_PHASE", "")
"""``scripts/test`` runs the suite in two phases: ``parallel`` (pytest-xdist's workers, every
test but the ``serial`` ones) and then ``serial`` (only those, alone on the machine). Unset: all."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tests of this phase (``TESTS_PHASE``), deselect the others."""
    if PHASE not in ("parallel", "serial"):
        return
    wanted = PHASE == "serial"
    kept: list[pytest.Item] = []
    other: list[pytest.Item] = []
    for item in items:
        (kept if (item.get_closest_marker("serial") is not None) == wanted else other).append(item)
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = kept


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Captured output reaches the report with lone surrogates escaped: tests feed the service
    undecodable bytes on purpose, and pytest-xdist's workers cannot send such text to the
    controller (the run would stop with an internal error)."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    report.sections = [(title, _encodable(text)) for title, text in report.sections]


def _encodable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.fixture(autouse=True)
def consumer_logger_restored() -> Iterator[None]:
    """Each test starts with the ``consumer`` logger as the previous one found it: code that
    configures logging in process (a server's or a command's start-up) sets its handlers, level
    and ``propagate`` for good, which would hide later tests' records from ``caplog``."""
    logger = logging.getLogger("consumer")
    kept = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = kept


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
def pg_engine(postgres_url: str) -> Iterator[Engine]:
    """An engine on ``postgres_url``, disposed afterwards."""
    engine = make_engine(postgres_url)
    yield engine
    engine.dispose()


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
def settings(database_url: str, tmp_path: Path) -> Settings:
    """Local mode on the test's database; mail a sweep sends goes to the test's own maildir, not
    to ``./maildir`` in the checkout."""
    settings = Settings(database_url=database_url, local_mode=True)
    return settings.with_values(maildir_path=str(tmp_path / "md"))


class Clock:
    """The service's injectable wall clock, moved by hand: ``advance(seconds)``, or set ``now``.
    Built without a start it follows the real clock (shifted by what was advanced), so rows the
    code stamps with the real time stay comparable; setting ``now`` stops it there."""

    def __init__(self, start: datetime | None = None) -> None:
        self.start, self.offset = start, timedelta()

    def __call__(self) -> datetime:
        return (self.start or utcnow()) + self.offset

    @property
    def now(self) -> datetime:
        return self()

    @now.setter
    def now(self, moment: datetime) -> None:
        self.start, self.offset = moment, timedelta()

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)

    def seconds(self) -> float:
        """The same clock as seconds, for the parts that take a ``time.monotonic``-like one."""
        return self().timestamp()


@pytest.fixture
def clock(request: pytest.FixtureRequest) -> Clock:
    """Follows the real clock; ``@pytest.mark.clock(datetime(...))`` stops it at that moment."""
    marker = request.node.get_closest_marker("clock")
    return Clock(marker.args[0] if marker else None)


@pytest.fixture
def app_settings(settings: Settings) -> Settings:
    """The settings ``client`` serves: a module overrides this fixture to serve others."""
    return settings


@pytest.fixture
def client(
    app_settings: Settings, clock: Clock, request: pytest.FixtureRequest
) -> Iterator[FlaskClient]:
    """The app on ``clock``, sharing the test's ``engine`` when the test uses one."""
    shared = "engine" in request.fixturenames
    engine = request.getfixturevalue("engine") if shared else make_engine(app_settings.database_url)
    yield create_app(Service.of(app_settings, engine), clock=clock).test_client()
    if not shared:
        engine.dispose()


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


@pytest.fixture
def start_server() -> Iterator[Callable[..., Server]]:
    """Start gunicorn servers (``Server``'s arguments); all stopped by PID after the test."""
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
