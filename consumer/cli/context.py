"""What every ``consumer`` command shares: the settings, one engine and the registry, each built
on first use and disposed once when the command ends.

Feature command groups (``jobs``, ``files``, ``deploy``...) take it with ``@pass_cli`` instead of
importing helpers back from ``consumer.cli.main``, so there is no import cycle.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from consumer.config.settings import DEFAULT_DATABASE_URL, Settings
from consumer.errors import DatabaseFault, SettingsError

if TYPE_CHECKING:
    from consumer.pipeline.registry import Registry


def load_settings(*, serves_push: bool = False, **overrides: Any) -> Settings:
    """Settings from the environment plus command-line overrides; only ``serve`` needs push
    authentication configured."""
    return load_with_plugins(serves_push=serves_push, **overrides)[0]


def load_with_plugins(
    *, serves_push: bool = False, **overrides: Any
) -> tuple[Settings, Registry | None]:
    """``load_settings``, and the registry the plugins were loaded into to read them
    (``Settings.loaded_from_env``), for a command that goes on to build the registry."""
    env = {**os.environ, **as_env(overrides)}
    try:
        return Settings.loaded_from_env(env, serves_push=serves_push)
    except SettingsError as exc:
        raise click.UsageError(f"invalid settings: {exc}") from exc


def as_env(overrides: Mapping[str, Any]) -> dict[str, str]:
    """Command-line options as the ``CONSUMER_*`` variables they stand for."""
    return {f"CONSUMER_{name.upper()}": str(v) for name, v in overrides.items() if v is not None}


class CliContext:
    """The command's settings, engine and registry (``ctx.obj``)."""

    def __init__(self) -> None:
        self._settings: Settings | None = None
        self._engine: Engine | None = None
        self._registry: Registry | None = None
        self._loaded: Registry | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings, self._loaded = load_with_plugins()
        return self._settings

    @property
    def engine(self) -> Engine:
        """The configured database, which must exist already (only ``db upgrade`` creates it)."""
        if self._engine is None:
            self._engine = open_engine(self.settings.database_url)
        return self._engine

    @property
    def database_url(self) -> str | None:
        """The configured URL, if the settings were loaded (error messages must not load them)."""
        return self._settings.database_url if self._settings is not None else None

    def require_database(self) -> None:
        """Refuse now, in one line, a database that does not exist or has no driver."""
        self.engine  # noqa: B018 (building it is the check)

    @property
    def has_engine(self) -> bool:
        return self._engine is not None

    @property
    def registry(self) -> Registry:
        """Built-in handlers and plugins; a broken plugin is a ``SettingsError`` naming it."""
        if self._registry is None:
            from consumer.plugins import build_registry

            self._registry = build_registry(self.settings, loaded=self._loaded)
            self._loaded = None
        return self._registry

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


pass_cli = click.make_pass_decorator(CliContext, ensure=True)
"""Decorator: the command receives the ``CliContext`` as its first argument."""


def current_cli() -> CliContext:
    """The running command's ``CliContext``, for helpers that are not commands themselves."""
    return click.get_current_context().ensure_object(CliContext)


def open_engine(url: str, *, create: bool = False) -> Engine:
    """An engine for ``url``, refusing (with the fix) a driver that is not installed and, unless
    ``create``, a SQLite file that does not exist: connecting would create an empty one."""
    from consumer.db.engine import make_engine

    if not create:
        _require_sqlite_file(url)
    try:
        return make_engine(url)
    except (ArgumentError, ImportError) as exc:
        raise DatabaseFault(
            f"CONSUMER_DATABASE_URL {safe_url(url)}: no such database driver ({exc}); "
            "use sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
        ) from exc


def _require_sqlite_file(url: str) -> None:
    try:
        parsed = make_url(url)
    except ArgumentError:
        return  # make_engine reports it
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return
    path = Path(parsed.database or "").resolve()
    if not path.exists():
        relative = " (the default is relative to the working directory)"
        raise DatabaseFault(
            f"no database at {path}{relative if url == DEFAULT_DATABASE_URL else ''}: "
            "set CONSUMER_DATABASE_URL, or run `consumer db upgrade` to create it"
        )


def safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(unparsable URL)"


def local_url(settings: Settings, path: str, *, configured: str = "") -> str:
    """``path`` on the server this machine runs at ``CONSUMER_BIND`` (a wildcard bind is reached
    on the loopback address), unless the setting named ``configured`` gives a URL."""
    url = str(settings.value(configured) or "") if configured else ""
    if url:
        return url
    host, _, port = settings.server.bind.rpartition(":")
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    return f"http://{host}:{port}{path}"
