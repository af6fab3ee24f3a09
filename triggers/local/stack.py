"""The local trigger stack: Google's Pub/Sub emulator, fake-gcs-server publishing OBJECT_FINALIZE
and OBJECT_DELETE notifications to it, topics with push subscriptions to the local service, and
a Cloud Scheduler stand-in publishing ticks. Used by ``triggers/local/up`` and ``down`` and by the
end-to-end tests (which start their own copies on free ports and stop them by PID).

Everything binds to 127.0.0.1. ``up`` records each process it starts in the state directory;
``down`` stops exactly those PIDs, and only if the PID still runs the program it started.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from triggers.local.clients import (
    ensure_bucket,
    ensure_push_subscription,
    ensure_topic,
    publisher,
    storage_client,
    subscriber,
)
from triggers.local.services import (
    DEFAULT_PROJECT,
    STORAGE_TOPIC,
    Child,
    fake_gcs_binary,
    free_port,
    missing,
    pubsub_emulator,
    spawn,
    start_fake_gcs,
    start_pubsub,
)

__all__ = [
    "DEFAULT_PROJECT", "STORAGE_TOPIC", "Child", "ensure_bucket", "ensure_push_subscription",
    "ensure_topic", "fake_gcs_binary", "free_port", "missing", "publisher", "pubsub_emulator",
    "start_fake_gcs", "start_pubsub", "storage_client", "subscriber",
]  # fmt: skip
DEFAULT_ENDPOINT = "http://127.0.0.1:8080/push"
TICK_TOPIC, DEPLOY_TOPIC = "ticks", "deploys"


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
    started = _start_all(state, pubsub_host, gcs_url, args)
    _record(state, started, stack_env(pubsub_host, gcs_url, args.tick_seconds, args.task))
    print((state / "env").read_text() + f"# stack up; logs and PIDs in {state}")


def _start_all(
    state: Path, pubsub_host: str, gcs_url: str, args: argparse.Namespace
) -> list[Child]:
    """Emulator, topics and subscriptions, fake-gcs-server, bucket, scheduler; all or nothing."""
    started: list[Child] = []
    try:
        started.append(start_pubsub(args.pubsub_port, state / "pubsub.log", args.project))
        _wire_pubsub(pubsub_host, args)
        gcs = start_fake_gcs(args.gcs_port, state / "gcs", state / "gcs.log", pubsub_host,
                             args.project)  # fmt: skip
        started.append(gcs)
        ensure_bucket(gcs_url, args.bucket)
        started.append(_start_scheduler(state, pubsub_host, args))
    except BaseException:
        for service in reversed(started):
            service.stop()
        raise
    return started


def _wire_pubsub(pubsub_host: str, args: argparse.Namespace) -> None:
    for topic, subscription in (
        (STORAGE_TOPIC, "consumer-storage"), (TICK_TOPIC, "consumer-ticks"),
        (DEPLOY_TOPIC, "consumer-deploys"),
    ):  # fmt: skip
        ensure_topic(pubsub_host, args.project, topic)
        ensure_push_subscription(
            pubsub_host, args.project, subscription, topic, args.endpoint, args.ack_deadline
        )


def _start_scheduler(state: Path, pubsub_host: str, args: argparse.Namespace) -> Child:
    command = [
        sys.executable, "-m", "triggers.local.scheduler", "--pubsub-host", pubsub_host,
        "--project", args.project, "--topic", TICK_TOPIC, "--every", str(args.tick_seconds),
        *[item for task in args.task for item in ("--task", task)],
    ]  # fmt: skip
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return spawn("scheduler", command, state / "scheduler.log", env)


def stack_env(pubsub_host: str, gcs_url: str, tick_seconds: int, tasks: Sequence[str]) -> str:
    """What the service needs to use the stack: the emulators' addresses, and the scheduler's
    cadence as the ticked tasks' period, so that every tick is its own slot (with the registered
    five-minute ``sweep``, four of five ticks would be duplicates and mail would wait)."""
    periods = ",".join(f"{task}={tick_seconds}" for task in tasks)
    return (
        f"export PUBSUB_EMULATOR_HOST={pubsub_host}\nexport STORAGE_EMULATOR_HOST={gcs_url}\n"
        f"export CONSUMER_TICK_PERIODS={periods}\n"
    )


def _record(state: Path, started: list[Child], env: str) -> None:
    pids = {
        service.name: {"pid": service.pid, "cmdline": _started_cmdline(service)}
        for service in started
    }
    (state / "pids.json").write_text(json.dumps(pids, indent=2))
    (state / "env").write_text(env)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def _started_cmdline(service: Child, timeout: float = 5) -> str:
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
    if args.tick_seconds < 1:
        parser.error("--tick-seconds must be at least 1")
    args.task = args.task or ["sweep", "cleanup"]
    (up if args.command == "up" else down)(args)


if __name__ == "__main__":
    main()
