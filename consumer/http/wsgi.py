"""Entry points for gunicorn. Read the environment here, at start-up, and nowhere else.

- ``consumer.http.wsgi:asgi()``: what the container and ``consumer serve`` run (gunicorn's asyncio
  worker, ``consumer.http.worker``), the Flask app behind the buffering bridge.
- ``consumer.http.wsgi:app()``: the plain Flask (WSGI) app, for a WSGI server of your own.

A worker reads its settings, loads each plugin and builds its authenticator once, whichever entry
point it runs. An invalid setting ends the worker with gunicorn's "failed to boot" status after
one line naming it: gunicorn then stops instead of restarting workers that can never boot.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import TypeVar

from flask import Flask

from consumer.auth.push import authenticator_for
from consumer.config.settings import Settings
from consumer.errors import SettingsError
from consumer.http.app import built_with, create_app
from consumer.http.bridge import BridgeLimits, BufferedWsgi
from consumer.http.gate import Gate
from consumer.observe.logs import configure_logging
from consumer.pipeline.registry import Registry
from consumer.plugins import build_registry

T = TypeVar("T")
WORKER_BOOT_ERROR = 3  # gunicorn's Arbiter.WORKER_BOOT_ERROR: halt, do not respawn


def app() -> Flask:
    settings, loaded = _loaded_or_exit()
    _started(settings)
    return _or_exit(lambda: create_app(settings, build_registry(settings, loaded=loaded)))


def asgi() -> BufferedWsgi:
    settings, loaded = _loaded_or_exit()
    return _or_exit(lambda: asgi_app(settings, build_registry(settings, loaded=loaded)))


def asgi_app(settings: Settings, registry: Registry | None = None) -> BufferedWsgi:
    """The service as gunicorn's ASGI worker serves it. Without ``registry`` the app loads the
    plugins itself: ``consumer serve``'s workers, each after the fork."""
    _started(settings)
    return bridged(create_app(settings, registry))


def bridged(flask_app: Flask) -> BufferedWsgi:
    """``flask_app`` behind the buffering bridge. An app ``create_app`` built brings its settings
    and its header gate (one certificate cache per worker, and the plain
    ``consumer.http.wsgi:app()`` under ``consumer.http.worker`` reads its settings once): the
    bridge runs that gate, then the app inside it, so no request meets the gate twice."""
    built = built_with(flask_app)
    if built is not None:
        return BufferedWsgi(built.gated.app, _limits(built.settings), built.gated.gate)
    settings = settings_or_exit()  # a Flask app of someone else's: settings from the environment
    gate = Gate(settings, authenticator_for(settings))
    return BufferedWsgi(flask_app, _limits(settings), gate)


def _limits(settings: Settings) -> BridgeLimits:
    return BridgeLimits(
        max_body_bytes=settings.server.max_body_bytes,
        # Capped so a slow body cannot outlast what Pub/Sub waits for the whole request.
        body_timeout_seconds=min(
            settings.server.body_timeout_seconds, settings.handler_budget_seconds
        ),
        header_timeout_seconds=settings.server.header_timeout_seconds,
        threads=settings.server.threads,
    )


def _started(settings: Settings) -> None:
    configure_logging(settings.logging.level, settings.logging.format, settings.logging.project_id)
    logging.getLogger("consumer").info("worker started", extra={"local_mode": settings.local_mode})


def _loaded_or_exit() -> tuple[Settings, Registry | None]:
    return _or_exit(lambda: Settings.loaded_from_env(os.environ))


def settings_or_exit() -> Settings:
    return _or_exit(lambda: Settings.from_env(os.environ))


def _or_exit(build: Callable[[], T]) -> T:
    """``build()``, or one line and gunicorn's boot-error exit on a settings error (a bad
    plugin included), instead of a traceback per worker."""
    try:
        return build()
    except SettingsError as error:
        print(f"invalid settings: {error}", file=sys.stderr)
        sys.exit(WORKER_BOOT_ERROR)
