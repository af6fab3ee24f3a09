"""gunicorn's configuration module for the container's command
(``gunicorn --config python:consumer.http.gunicorn_conf 'consumer.http.wsgi:asgi()'``): every value
comes
from ``consumer.http.gunicorn_options``, the same source ``consumer serve`` uses.

An invalid setting, or a plugin that cannot load or register, stops gunicorn here, before any
worker boots, with one line naming it.
"""

from __future__ import annotations

import os
import sys

from consumer.config.settings import Settings
from consumer.errors import SettingsError
from consumer.http.gunicorn_options import options
from consumer.plugins import build_registry

try:
    _settings, _loaded = Settings.loaded_from_env(os.environ)
    # The plugins' registry finished once here, then dropped (each worker builds its own after
    # the fork): a plugin that cannot load or register stops the server before any worker
    # boots, not each worker (two workers failing to boot at once made gunicorn's arbiter halt
    # with a traceback).
    build_registry(_settings, loaded=_loaded)
except SettingsError as _error:
    print(f"invalid settings: {_error}", file=sys.stderr)
    sys.exit(2)
del _loaded

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
