"""``consumer serve``: gunicorn run in this process through its application API, so stopping
``serve`` (SIGTERM, SIGINT, Ctrl-C) stops the server and its workers with it; plus, in local mode
only, one tick source for the whole server (never one per worker: that was the original bug).

The service is composed once here before gunicorn starts (``consumer.service``), and its
database checked: a fault is one line and exit 2, not a worker boot failure per worker. Each
worker then composes its own from the same environment: what a plugin's ``register`` opens (a
client, a connection) is never shared across the fork.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from typing import Any

from gunicorn.app.base import BaseApplication

from consumer.config.settings import Settings
from consumer.db.migrate import upgrade
from consumer.http.gunicorn_options import options
from consumer.http.wsgi import asgi
from consumer.observe import exporting, metrics
from consumer.observe.logs import configure_logging
from consumer.service import Service, or_exit
from consumer.ticks.stand_in import LocalTicker


class Server(BaseApplication):
    """gunicorn's arbiter in this process; each worker builds the app from ``settings``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.ticker: LocalTicker | None = None
        super().__init__()

    def load_config(self) -> None:
        for key, value in options(self.settings).items():
            self.cfg.set(key, value)
        self.cfg.set("when_ready", self._when_ready)
        self.cfg.set("on_exit", self._on_exit)

    def load(self) -> Any:
        """In each worker, after the fork: its own composition, from this process's environment
        (the command line's values included)."""
        return asgi()

    def _when_ready(self, _server: Any) -> None:
        self.ticker = start_ticker(self.settings)

    def _on_exit(self, _server: Any) -> None:
        if self.ticker:
            self.ticker.stop()


OWNED_METRICS_ENV = "PROMETHEUS_MULTIPROC_DIR_OWNED_BY_SERVE"
"""Set by ``serve`` for its restarted self: the metrics directory to remove on exit."""


def run(compose: Callable[[], Service], overrides: Mapping[str, str]) -> None:
    """Serve until stopped. ``compose``: the service from the environment, called after the
    restart ``_metrics_directory`` may make, never before (a composition before it would be made
    again, every plugin registered again, by the same PID). A fault still stops ``serve`` before
    gunicorn starts, from the restarted process, which removes the metrics directory it was
    given. ``overrides`` (the command line's ``CONSUMER_*`` values) go into this process's
    environment first: the workers compose from it, and plugins may read their own variables."""
    owned_metrics_dir = _metrics_directory()
    owner = os.getpid()
    try:
        os.environ.update(overrides)
        settings = _checked(or_exit(compose))
        _wake_locally(settings)
        Server(settings).run()
    finally:
        # A gunicorn worker is forked inside ``Server.run()``: its exit (an abort after a pause,
        # a failed boot) unwinds through this block too, and must not take the directory the
        # pod's other workers still write to.
        if owned_metrics_dir and os.getpid() == owner:
            shutil.rmtree(owned_metrics_dir, ignore_errors=True)


def _checked(service: Service) -> Settings:
    """The pre-start check: the trace exporter must find its project (``exporting.check``); in
    local mode the database is migrated first (a convenience; in a cluster the migration Job runs
    once per release), then it must exist and be at head (an unreachable one is logged:
    readiness waits for it).
    The composition is dropped before the fork: the workers compose their own."""
    settings = service.settings
    configure_logging(settings.logging.level, settings.logging.format, settings.logging.project_id)
    or_exit(lambda: exporting.check(settings.tracing))
    if settings.local_mode:
        or_exit(lambda: upgrade(settings.database_url), service=service)
    or_exit(lambda: service.require_database(serving=True), service=service)
    service.close()
    return settings


def _metrics_directory() -> str:
    """The workers' metrics are summed from a shared directory (``/metrics``). prometheus_client
    chooses its storage when it is first imported, which in this process has already happened,
    and forked workers inherit that choice: so without a directory, make one and start this
    command again (same PID, same arguments) with it set. Returns the directory made here."""
    if os.environ.get(metrics.MULTIPROC_ENV):
        return os.environ.get(OWNED_METRICS_ENV, "")
    directory = tempfile.mkdtemp(prefix="consumer-metrics-")
    os.environ[metrics.MULTIPROC_ENV] = directory
    os.environ[OWNED_METRICS_ENV] = directory
    os.execv(sys.executable, [sys.executable, "-m", "consumer", *sys.argv[1:]])


def _wake_locally(settings: Settings) -> None:
    """In local mode, without Pub/Sub for wake-ups, the workers' enqueues POST theirs to this
    server (``consumer.jobs.wake``): the workers compose from this process's environment."""
    jobs = settings.jobs
    if settings.local_mode and not (jobs.wake_topic or jobs.wake_url):
        os.environ["CONSUMER_WAKE_URL"] = f"http://{settings.server.bind}/push"


def start_ticker(settings: Settings) -> LocalTicker | None:
    if not (settings.local_mode and settings.server.local_tick_seconds > 0):
        return None
    ticker = LocalTicker(f"http://{settings.server.bind}/push", settings.server.local_tick_seconds)
    threading.Thread(target=ticker.run, name="local-ticker", daemon=True).start()
    return ticker
