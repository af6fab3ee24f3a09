"""Entry points for gunicorn: each worker composes the service (``consumer.service``) once, from
the environment, after the fork.

- ``consumer.http.wsgi:asgi()``: what the container and ``consumer serve`` run (gunicorn's
  asyncio worker, ``consumer.http.worker``), the Flask app behind the buffering bridge.
- ``consumer.http.wsgi:app()``: the plain Flask (WSGI) app, for a WSGI server of your own.

A fault at start-up ends the worker with gunicorn's "failed to boot" status after one line naming
it: gunicorn then stops instead of restarting workers that can never boot. The master checked the
same composition before forking (``consumer.http.gunicorn_conf``, ``consumer serve``), so this is
the rare case of a fault that appeared in between.
"""

from __future__ import annotations

import logging
import os

from flask import Flask

from consumer.auth.push import authenticator_for
from consumer.config.settings import Settings
from consumer.http.app import built_with, create_app
from consumer.http.bridge import BridgeLimits, BufferedWsgi
from consumer.http.door import GatedWsgi
from consumer.http.gate import Gate
from consumer.jobs import listen
from consumer.observe.logs import configure_logging
from consumer.pipeline.dispatch import Dispatcher
from consumer.service import Service, compose, or_exit

WORKER_BOOT_ERROR = 3  # gunicorn's Arbiter.WORKER_BOOT_ERROR: halt, do not respawn


def app() -> Flask:
    return _app(_composed())


def asgi() -> BufferedWsgi:
    return bridged(_app(_composed()))


def _composed() -> Service:
    return or_exit(lambda: compose(os.environ), status=WORKER_BOOT_ERROR)


def _app(service: Service) -> Flask:
    _started(service.settings)
    app = or_exit(
        lambda: create_app(service),
        status=WORKER_BOOT_ERROR,
    )
    # PostgreSQL: a job whose enqueue commits with a NOTIFY starts at once in this worker.
    listen.start(Dispatcher(service.settings, service.engine, service.registry))
    return app


def bridged(flask_app: Flask) -> BufferedWsgi:
    """``flask_app`` behind the buffering bridge. An app ``create_app`` built (or one that mounts
    the routes) brings its settings and its front door (one certificate cache per worker, and the
    plain ``consumer.http.wsgi:app()`` under ``consumer.http.worker`` reads its settings once):
    the bridge admits each request with that door's gate, then calls the door with the
    admission, so no request is admitted twice."""
    built = built_with(flask_app)
    if built is not None:
        return BufferedWsgi(built.gated, _limits(built.settings), built.gated.gate)
    # A Flask app of someone else's, with no consumer route: settings from the environment, a
    # door with no rows (every request is the app's, under the body limit and deadline).
    settings = _composed().settings
    gate = Gate(settings, authenticator_for(settings), routes=(), embedded=True)
    return BufferedWsgi(GatedWsgi(gate, flask_app), _limits(settings), gate)


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
