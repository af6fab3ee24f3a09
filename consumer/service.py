"""The composition root: the one place the service is built from the environment.

    registry (built-ins, then plugins) -> settings (from the registry's sections)
        -> HTTP targets (the plugins' and the settings', into the registry) -> engine

Every entry point composes its ``Service`` here, once per process: the gunicorn master and each
worker, ``consumer serve``, every command of the CLI, the dashboard, pull and replay (and so
every server the demo and the benches start); code that builds its settings itself (tests, an
app that embeds the service) uses ``Service.of``.

Every fault of start-up (a bad setting, a plugin that fails to load or register, a database that
is missing, unreachable or not migrated) surfaces the same way: ``or_exit`` prints one line
naming the fault and its fix, and exits 2.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NoReturn, TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from consumer.config.parse import names
from consumer.config.settings import Settings, redacted_url
from consumer.db.engine import unavailable_on_db_fault
from consumer.db.migrate import require_schema_at_head
from consumer.db.opening import UPGRADE, explain_fault, first_line, open_engine
from consumer.errors import ConsumerError, DatabaseFault, NotMigrated, Unavailable
from consumer.jobs import wake
from consumer.pipeline.registry import Registry
from consumer.plugins import build_registry, load_plugins
from consumer.targets.install import install_targets

T = TypeVar("T")
log = logging.getLogger("consumer.service")
STARTUP_FAILED = 2
"""The exit status of every entry point that cannot start (click's, for a usage error)."""


@dataclass
class Service:
    """What every entry point runs with: the settings, the registry they were read with, and the
    engine (opened on first use, so commands that never touch the database never open it)."""

    settings: Settings
    registry: Registry
    _engine: Engine | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self._engine is not None:
            wake.attach(self._engine, self.settings)

    @property
    def engine(self) -> Engine:
        """Its enqueues wake a sweeper as the settings say (``consumer.jobs.wake``)."""
        if self._engine is None:
            self._engine = open_engine(
                self.settings.database_url, waits=self.settings.database_waits
            )
            wake.attach(self._engine, self.settings)
        return self._engine

    @property
    def has_engine(self) -> bool:
        return self._engine is not None

    def require_database(self, *, serving: bool = False) -> None:
        """Refuse now a database that is missing, unreachable or not migrated. A server
        (``serving``) that finds it unreachable starts all the same, says so in one line, and
        stays unready until it answers: a database outage must take pods out of the load
        balancer, not restart them in a loop. A missing or unmigrated one stops it: that is a
        deployment fault, which waiting does not mend."""
        try:
            with unavailable_on_db_fault(), self.engine.connect() as connection:
                require_schema_at_head(self.engine, connection)
        except NotMigrated:
            where = redacted_url(self.settings.database_url)
            raise NotMigrated(
                f"the database {where} is not migrated (its schema is not at this code's head "
                f"revision): {UPGRADE}"
            ) from None
        except Unavailable as error:
            if not serving or isinstance(error, DatabaseFault):
                raise
            log.warning("serving without the database, not ready until it answers: %s",
                        explain(error, self))  # fmt: skip

    @classmethod
    def of(cls, settings: Settings, engine: Engine | None = None) -> Service:
        """The service for settings built in code (tests, an app that embeds the service):
        the registry of their plugins (``consumer.plugins.build_registry``) and their targets."""
        registry = build_registry(settings)
        install_targets(registry, settings)
        return cls(settings, registry, engine)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


def compose(
    env: Mapping[str, str], *, serves_push: bool = True, engine: Engine | None = None
) -> Service:
    """The service ``env`` describes: the built-in handlers and every plugin registered once,
    then the settings read with the sections the registry collected, then (lazily) the engine.
    ``serves_push=False``: a tool with no endpoint to authenticate (pull mode, the CLI)."""
    registry = compose_registry(env)
    sections = registry.setting_sections.values()
    settings = Settings.from_env(env, serves_push=serves_push, sections=sections)
    registry.period_overrides = dict(settings.ticks.periods)
    install_targets(registry, settings)  # HTTP targets: the plugins' and the settings'
    return Service(settings, registry, engine)


def compose_registry(env: Mapping[str, str]) -> Registry:
    """The first step of ``compose`` alone: the built-ins and the plugins of ``env``
    (``CONSUMER_PLUGINS`` and the installed entry points), each registered once."""
    return load_plugins(names(env.get("CONSUMER_PLUGINS", "")))


def explain(error: BaseException, service: Service | None = None) -> str:
    """One line: what went wrong at start-up and, when known, what to do."""
    cause = error.__cause__ if isinstance(error, Unavailable) else None
    if isinstance(cause, DBAPIError):
        error = cause  # "database unavailable" alone hides the real cause
    if isinstance(error, DBAPIError):
        url = service.settings.database_url if service else None
        engine = service._engine if service else None
        return explain_fault(error, url, engine)
    return first_line(str(error)) or type(error).__name__


def or_exit(
    build: Callable[[], T], *, status: int = STARTUP_FAILED, service: Service | None = None
) -> T:
    """``build()``, or one line on stderr and exit ``status`` when it raises a ``ConsumerError``
    or a database fault: no traceback, whichever entry point is starting. ``service``: the one
    being started, whose database a fault names."""
    try:
        return build()
    except (ConsumerError, DBAPIError) as error:
        fail(explain(error, service), status)


def fail(line: str, status: int = STARTUP_FAILED) -> NoReturn:
    print(f"consumer: {line}", file=sys.stderr)
    sys.exit(status)
