"""gunicorn's configuration of ``consumer dashboard``
(``gunicorn --config python:consumer.dashboard.gunicorn_conf 'consumer.dashboard.wsgi:app()'``):
its error and access lines in the format ``serve`` writes (``consumer.observe.logs``: JSON for
Cloud Logging, or text on a terminal, per ``CONSUMER_LOG_FORMAT``), so one terminal or one log
query reads both processes alike. Successful probes are not logged, as for ``serve``."""

from __future__ import annotations

import os

from consumer.observe import logs
from consumer.service import compose, or_exit

_logging = or_exit(lambda: compose(os.environ, serves_push=False)).settings.logging

accesslog = "-"
access_log_format = logs.ACCESS_LOG_FORMAT
_PROBES = {"routine": ["/healthz", "/readyz"]}  # the dashboard's own probes
logconfig_dict = logs.gunicorn_logconfig(
    _logging.level, _logging.format, _logging.project_id, _PROBES
)
