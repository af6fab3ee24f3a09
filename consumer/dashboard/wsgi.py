"""WSGI entry point of the dashboard: ``gunicorn 'consumer.dashboard.wsgi:app()'``. Reads the
environment here, at start-up, and nowhere else."""

from __future__ import annotations

import os

from flask import Flask

from consumer.config.settings import Settings
from consumer.dashboard.app import create_dashboard
from consumer.observe.logs import configure_logging


def app() -> Flask:
    settings = Settings.from_env(os.environ, serves_push=False)
    configure_logging(settings.logging.level)
    return create_dashboard(settings)
