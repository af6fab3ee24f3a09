"""gunicorn's settings, derived from ``Settings``: one source for the container's command
(``gunicorn --config python:consumer.http.gunicorn_conf``) and for ``consumer serve`` (in-process).

The worker timeout and the graceful shutdown can never disagree with the ack deadline: a worker
is ended when Pub/Sub has already given up on its request (``consumer.http.worker``'s watchdog),
and a
stopping pod lets in-flight requests run as long as Pub/Sub waits for them.
"""

from __future__ import annotations

import glob
import os
from typing import Any

from prometheus_client import multiprocess

from consumer.config.settings import Settings
from consumer.http.routes import access_patterns
from consumer.observe.logs import ACCESS_LOG_FORMAT, gunicorn_logconfig

WORKER_CLASS = "consumer.http.worker.ConsumerWorker"
# Connections one worker holds open (slow or idle ones included): each costs a socket and a small
# buffer on the event loop. Past it the worker stops accepting, so the others get the new ones.
WORKER_CONNECTIONS = 1000
# Idle kept-alive connections stay open longer than Google's load balancer keeps its own (600 s),
# so the balancer never sends a request down a connection the worker has just closed (a 502).
# An idle connection costs a socket on the event loop, not a thread.
KEEPALIVE_SECONDS = 620


def options(settings: Settings) -> dict[str, Any]:
    return {
        "bind": settings.server.bind,
        "workers": settings.server.workers,
        "worker_class": WORKER_CLASS,
        "worker_connections": WORKER_CONNECTIONS,
        "keepalive": KEEPALIVE_SECONDS,
        "timeout": settings.gunicorn_timeout_seconds,
        "graceful_timeout": settings.gunicorn_timeout_seconds,
        "accesslog": "-",
        "access_log_format": ACCESS_LOG_FORMAT,  # the path without the query: no ?token= logged
        # gunicorn's own lines (access lines included) in the service's format: JSON in a pod.
        "logconfig_dict": gunicorn_logconfig(
            settings.logging.level,
            settings.logging.format,
            settings.logging.project_id,
            access_patterns(),  # the route table's deliveries and probes
        ),
        # No runtime control socket: nothing in a pod uses it, its default home is not writable.
        "control_socket_disable": True,
        # Heartbeat files in memory: the container's root filesystem is read-only, and a
        # disk-backed /tmp can stall heartbeats (gunicorn's own advice for containers).
        "worker_tmp_dir": "/dev/shm" if os.path.isdir("/dev/shm") else None,
        "on_starting": on_starting,
        "child_exit": child_exit,
    }


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
        multiprocess.mark_process_dead(worker.pid)
