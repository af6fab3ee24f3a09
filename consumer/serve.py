"""``consumer serve``: gunicorn with timeouts derived from the settings, plus, in local mode only,
one tick source for the whole server (never one per worker: that was the original bug)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Mapping

from consumer import metrics
from consumer.db.migrate import upgrade
from consumer.logs import configure_logging
from consumer.settings import Settings
from consumer.ticker import LocalTicker


def gunicorn_command(settings: Settings) -> list[str]:
    return [
        sys.executable, "-m", "gunicorn",
        "--config", "python:consumer.gunicorn_conf",
        "--bind", settings.bind,
        "--workers", str(settings.workers),
        "--timeout", str(settings.gunicorn_timeout_seconds),
        "--graceful-timeout", str(settings.gunicorn_timeout_seconds),
        "--access-logfile", "-",
        "--no-control-socket",
        "consumer.wsgi:app()",
    ]  # fmt: skip


def run(settings: Settings, overrides: Mapping[str, str]) -> None:
    """Serve until gunicorn exits; ``overrides`` (the command line's ``CONSUMER_*`` values) reach
    the workers, which build their settings from the environment."""
    configure_logging(settings.log_level, settings.log_format, settings.project_id)
    if settings.local_mode:
        # Local convenience only; in a cluster the migration Job runs once per release.
        upgrade(settings.database_url)
    env = {**os.environ, **overrides}
    with metrics.multiprocess_dir(env):  # the workers' metrics, summed by /metrics
        server = subprocess.Popen(gunicorn_command(settings), env=env)
        ticker = _start_ticker(settings)
        try:
            server.wait()
        except KeyboardInterrupt:
            server.terminate()
            server.wait()
        finally:
            if ticker:
                ticker.stop()
    sys.exit(server.returncode)


def _start_ticker(settings: Settings) -> LocalTicker | None:
    if not (settings.local_mode and settings.local_tick_seconds > 0):
        return None
    ticker = LocalTicker(f"http://{settings.bind}/push", settings.local_tick_seconds)
    threading.Thread(target=ticker.run, name="local-ticker", daemon=True).start()
    return ticker
