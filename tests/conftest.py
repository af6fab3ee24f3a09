"""Shared fixtures, defined once: real databases (a fresh SQLite file, a fresh PostgreSQL database
per test), the service's clock moved by hand, a test client of the app, and real gunicorn servers
(the production asyncio worker unless a test asks for another)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import hypothesis
import psycopg
import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from bench.support.postgres import PG_ADMIN_DSN as PG_ADMIN_DSN
from bench.support.postgres import migrated_postgres_database as migrated_postgres_database
from bench.support.serving import PRODUCTION as PRODUCTION
from bench.support.serving import TEST_SIGNING_SECRET as TEST_SIGNING_SECRET
from bench.support.serving import TEST_SOURCES as TEST_SOURCES
from bench.support.serving import Server as Server
from bench.support.serving import free_port as free_port
from bench.support.serving import gunicorn_command as gunicorn_command
from bench.support.serving import server_env as server_env
from bench.support.serving import settings_env as settings_env
from bench.support.serving import stop_process as stop_process
from bench.support.serving import wait_ready as wait_ready
from bench.support.serving import wait_until as wait_until
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.db.migrate import upgrade
from consumer.http.app import create_app
from consumer.service import Service
from consumer.wire.timeutil import utcnow

# CI explores the same generated cases every run (a new random failure would block a landing
# for reasons unrelated to the change); developers' runs keep exploring new ones.
hypothesis.settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    hypothesis.settings.load_profile("ci")

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


def with_settings(settings: Settings, **changes: Any) -> Settings:
    return settings.with_values(**changes)
