"""Entry points for gunicorn. Read the environment here, at start-up, and nowhere else.

- ``consumer.wsgi:asgi()``: what the container and ``consumer serve`` run (gunicorn's asyncio
  worker, ``consumer.worker``), the Flask app behind the buffering bridge.
- ``consumer.wsgi:app()``: the plain Flask (WSGI) app, for a WSGI server of your own.

An invalid setting ends the worker with gunicorn's "failed to boot" status after one line naming
it: gunicorn then stops instead of restarting workers that can never boot.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import TypeVar

from flask import Flask

from consumer.app import create_app
from consumer.auth import authenticator_for
from consumer.bridge import BridgeLimits, BufferedWsgi
from consumer.errors import SettingsError
from consumer.logs import configure_logging
from consumer.precheck import precheck_for
from consumer.settings import Settings

T = TypeVar("T")
WORKER_BOOT_ERROR = 3  # gunicorn's Arbiter.WORKER_BOOT_ERROR: halt, do not respawn


def app() -> Flask:
    settings = settings_or_exit()
    configure_logging(settings.logging.level, settings.logging.format, settings.logging.project_id)
    logging.getLogger("consumer").info("worker started", extra={"local_mode": settings.local_mode})
    return _or_exit(lambda: create_app(settings))


def asgi() -> BufferedWsgi:
    settings = settings_or_exit()
    return _or_exit(lambda: asgi_app(settings))


def asgi_app(settings: Settings, flask_app: Flask | None = None) -> BufferedWsgi:
    """The service as gunicorn's ASGI worker serves it."""
    configure_logging(settings.logging.level, settings.logging.format, settings.logging.project_id)
    logging.getLogger("consumer").info("worker started", extra={"local_mode": settings.local_mode})
    limits = BridgeLimits(
        max_body_bytes=settings.server.max_body_bytes,
        # Capped so a slow body cannot outlast what Pub/Sub waits for the whole request.
        body_timeout_seconds=min(
            settings.server.body_timeout_seconds, settings.handler_budget_seconds
        ),
        header_timeout_seconds=settings.server.header_timeout_seconds,
        threads=settings.server.threads,
    )
    if flask_app is not None:
        return BufferedWsgi(flask_app, limits, precheck_for(settings))
    # One authenticator for the precheck and the view: one certificate cache per worker.
    authenticate = authenticator_for(settings)
    flask_app = create_app(settings, authenticate=authenticate)
    return BufferedWsgi(flask_app, limits, precheck_for(settings, authenticate))


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
