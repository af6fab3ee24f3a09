"""gunicorn's configuration module for the container's command
(``gunicorn --config python:consumer.http.gunicorn_conf 'consumer.http.wsgi:asgi()'``): every
value comes from ``consumer.http.gunicorn_options``, the same source ``consumer serve`` uses.

The master composes the service once (``consumer.service``) when it reads this module, checks
that the trace exporter finds its project (``consumer.observe.exporting.check``), and checks its
database when the arbiter is ready, before any worker boots: a bad setting, a plugin that cannot
load or register, a trace project not found, or a database that is missing or not migrated stops
gunicorn with one line and exit 2 (an unreachable one is logged, and readiness waits for it),
not each worker (two workers failing to boot at once made gunicorn's arbiter halt with a
traceback). Each worker then composes its own after the fork.
"""

from __future__ import annotations

import os
from typing import Any

from consumer.http.gunicorn_options import options
from consumer.observe import exporting
from consumer.service import compose, or_exit

_service = or_exit(lambda: compose(os.environ))
_settings = _service.settings
or_exit(lambda: exporting.check(_settings.tracing))


def when_ready(_server: Any) -> None:
    """The arbiter's last step before it forks the workers: the database must be usable."""
    or_exit(lambda: _service.require_database(serving=True), service=_service)
    _service.close()  # no pooled connection crosses the fork


_options = options(_settings)
bind = _options["bind"]
workers = _options["workers"]
worker_class = _options["worker_class"]
worker_connections = _options["worker_connections"]
keepalive = _options["keepalive"]
timeout = _options["timeout"]
graceful_timeout = _options["graceful_timeout"]
accesslog = _options["accesslog"]
access_log_format = _options["access_log_format"]
logconfig_dict = _options["logconfig_dict"]
control_socket_disable = _options["control_socket_disable"]
worker_tmp_dir = _options["worker_tmp_dir"]
on_starting = _options["on_starting"]
child_exit = _options["child_exit"]
