"""``consumer serve``: gunicorn run in this process through its application API, so stopping
``serve`` (SIGTERM, SIGINT, Ctrl-C) stops the server and its workers with it; plus, in local mode
only, one tick source for the whole server (never one per worker: that was the original bug).

Plugins are imported once here before gunicorn starts: a bad ``CONSUMER_PLUGINS`` is one line
and a non-zero exit, not a worker boot failure per worker.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping
from typing import Any

from gunicorn.app.base import BaseApplication

from consumer import metrics
from consumer.db.migrate import upgrade
from consumer.errors import SettingsError
from consumer.gunicorn_options import options
from consumer.logs import configure_logging
from consumer.plugins import build_registry
from consumer.settings import Settings
from consumer.ticker import LocalTicker


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
        from consumer.wsgi import asgi_app

        return asgi_app(self.settings)

    def _when_ready(self, _server: Any) -> None:
        self.ticker = start_ticker(self.settings)

    def _on_exit(self, _server: Any) -> None:
        if self.ticker:
            self.ticker.stop()


OWNED_METRICS_ENV = "PROMETHEUS_MULTIPROC_DIR_OWNED_BY_SERVE"
"""Set by ``serve`` for its restarted self: the metrics directory to remove on exit."""


def run(settings: Settings, overrides: Mapping[str, str]) -> None:
    """Serve until stopped. ``overrides`` (the command line's ``CONSUMER_*`` values) also go into
    this process's environment, for plugins that read their own variables."""
    owned_metrics_dir = _metrics_directory()
    configure_logging(settings.logging.level, settings.logging.format, settings.logging.project_id)
    os.environ.update(overrides)
    try:
        build_registry(settings)
    except SettingsError as error:
        print(f"invalid settings: {error}", file=sys.stderr)
        sys.exit(2)
    if settings.local_mode:
        # Local convenience only; in a cluster the migration Job runs once per release.
        upgrade(settings.database_url)
    try:
        Server(settings).run()
    finally:
        if owned_metrics_dir:
            shutil.rmtree(owned_metrics_dir, ignore_errors=True)


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


def start_ticker(settings: Settings) -> LocalTicker | None:
    if not (settings.local_mode and settings.server.local_tick_seconds > 0):
        return None
    ticker = LocalTicker(f"http://{settings.server.bind}/push", settings.server.local_tick_seconds)
    threading.Thread(target=ticker.run, name="local-ticker", daemon=True).start()
    return ticker
