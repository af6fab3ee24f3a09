"""gunicorn's configuration, derived from the ``CONSUMER_*`` settings.

The container image runs ``gunicorn --config python:consumer.gunicorn_conf`` and
``consumer serve`` passes the same module, so the worker timeout and the graceful shutdown
can never disagree with the ack deadline: a worker is killed when Pub/Sub has already given up on
the request, and a shutting-down pod lets in-flight requests run as long as Pub/Sub waits for them.
"""

from __future__ import annotations

import glob
import os
from typing import Any

from consumer.logs import ACCESS_LOG_FORMAT, gunicorn_logconfig
from consumer.settings import Settings

_settings = Settings.from_env(os.environ)

bind = _settings.bind
workers = _settings.workers
timeout = _settings.gunicorn_timeout_seconds
graceful_timeout = _settings.gunicorn_timeout_seconds
accesslog = "-"
access_log_format = ACCESS_LOG_FORMAT  # the path without the query: no ?token= in the log
# gunicorn's own lines (access lines included) in the service's format: JSON in a container.
logconfig_dict = gunicorn_logconfig(_settings.log_level, _settings.log_format, _settings.project_id)
# No runtime control socket: nothing in a pod uses it, and its default home is not writable there.
control_socket_disable = True
# Heartbeat files in memory: the container's root filesystem is read-only, and a disk-backed
# /tmp can stall heartbeats (gunicorn's own advice for containers).
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None


def on_starting(server: Any) -> None:
    """Start with an empty metrics directory: files left by a previous run would be summed in."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        os.makedirs(directory, exist_ok=True)
        for leftover in glob.glob(os.path.join(directory, "*.db")):
            os.remove(leftover)


def child_exit(server: Any, worker: Any) -> None:
    """Drop a dead worker's live gauges (prometheus_client's multiprocess rule)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
