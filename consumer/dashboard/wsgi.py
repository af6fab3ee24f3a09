"""WSGI entry point of the dashboard: ``gunicorn 'consumer.dashboard.wsgi:app()'``. Each worker
composes the service (``consumer.service``) once, from the environment, at start-up."""

from __future__ import annotations

import os

from flask import Flask

from consumer.dashboard.app import create_dashboard
from consumer.observe.logs import configure_logging
from consumer.service import compose, or_exit


def app() -> Flask:
    service = or_exit(lambda: compose(os.environ, serves_push=False))
    logging = service.settings.logging  # the lines of ``serve``: JSON, or text on a terminal
    configure_logging(logging.level, logging.format, logging.project_id)
    return or_exit(lambda: create_dashboard(service), service=service)
