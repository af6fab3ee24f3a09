"""WSGI entry point for gunicorn: ``gunicorn 'consumer.wsgi:app()'``. Reads the environment here,
at start-up, and nowhere else."""

from __future__ import annotations

import logging
import os

from flask import Flask

from consumer.app import create_app
from consumer.logs import configure_logging
from consumer.settings import Settings


def app() -> Flask:
    settings = Settings.from_env(os.environ)
    configure_logging(settings.log_level, settings.log_format, settings.project_id)
    logging.getLogger("consumer").info("worker started", extra={"local_mode": settings.local_mode})
    return create_app(settings)
