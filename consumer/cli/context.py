"""What every ``consumer`` command shares: the composed service (settings, registry, engine),
built on first use from the environment (``consumer.service.compose``), once per process, and
closed when the command ends.

Feature command groups (``jobs``, ``files``, ``deploy``...) take it with ``@pass_cli`` instead of
importing helpers back from ``consumer.cli.main``, so there is no import cycle.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import click
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.pipeline.registry import Registry
from consumer.service import Service, compose


def as_env(overrides: Mapping[str, Any]) -> dict[str, str]:
    """Command-line options as the ``CONSUMER_*`` variables they stand for."""
    return {f"CONSUMER_{name.upper()}": str(v) for name, v in overrides.items() if v is not None}


class CliContext:
    """The command's composed service (``ctx.obj``)."""

    def __init__(self) -> None:
        self._service: Service | None = None

    def compose(self, *, serves_push: bool = False, **overrides: Any) -> Service:
        """The service, composed on the first call from the environment plus ``overrides``
        (command-line options, named like their variables without ``CONSUMER_``); only
        ``serve`` needs push authentication configured."""
        if self._service is None:
            env = {**os.environ, **as_env(overrides)}
            self._service = compose(env, serves_push=serves_push)
        return self._service

    @property
    def service(self) -> Service:
        return self.compose()

    @property
    def settings(self) -> Settings:
        return self.service.settings

    @property
    def registry(self) -> Registry:
        return self.service.registry

    @property
    def engine(self) -> Engine:
        """The configured database, which must exist already (only ``db upgrade`` creates it)."""
        return self.service.engine

    @property
    def composed(self) -> Service | None:
        """The service, if composed (error messages must not compose it)."""
        return self._service

    def require_database(self) -> None:
        """Refuse now, in one line, a database that does not exist or has no driver."""
        self.engine  # noqa: B018 (opening it is the check)

    @property
    def has_engine(self) -> bool:
        return self._service is not None and self._service.has_engine

    def close(self) -> None:
        if self._service is not None:
            self._service.close()


pass_cli = click.make_pass_decorator(CliContext, ensure=True)
"""Decorator: the command receives the ``CliContext`` as its first argument."""


def current_cli() -> CliContext:
    """The running command's ``CliContext``, for helpers that are not commands themselves."""
    return click.get_current_context().ensure_object(CliContext)


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
