"""The three consumer pods of the chaos run: ``consumer serve`` (gunicorn, two asyncio workers
each) on fixed loopback ports behind the demo's round-robin balancer, started as the demo starts
them, SIGKILLed by process group and started again on the same port, or frozen (SIGSTOP: the
whole group, or one worker) and thawed again (SIGCONT)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import requests

from consumer.demo.processes import Child, descendants, spawn, wait_until

ACK_DEADLINE_SECONDS = 10
MAIL_FROM = "reports@example.com"
HOOK_SECRET = "chaos-deploy-hook-secret-0123456789"
DEPLOY_SERVICE = "web"
CALL_KIND = "call"
BUCKET = "uploads"
MAIL_PREFIX = "mail/"
TARGET_TIMEOUT_SECONDS = 2
TICK_MAX_AGE_PERIODS = 30
"""A tick is swept up to 30 s (periods) after its slot: on a busy machine the emulator's pushes
lag by seconds, and with the default (2) every tick would be skipped as stale and nothing swept."""
START_SECONDS = 120
STOP_SECONDS = 5
RESTART_BACKOFF_SECONDS = 1.0


@dataclass(frozen=True)
class Wiring:
    """Where the pods find everything else."""

    database_url: str
    smtp_port: int
    target_url: str
    gcs_url: str
    workdir: Path


def targets(url: str) -> str:
    """Deploys of ``web`` and jobs of kind ``call`` are served by the Node.js target."""
    none = {"type": "none"}
    declared = [
        {"name": "deploys", "url": f"{url}/deploy", "auth": none,
         "serves": {"deploy": DEPLOY_SERVICE}, "timeout_seconds": TARGET_TIMEOUT_SECONDS},
        {"name": "calls", "url": f"{url}/job", "auth": none,
         "serves": {"job_kind": CALL_KIND}, "timeout_seconds": TARGET_TIMEOUT_SECONDS},
    ]  # fmt: skip
    return json.dumps(declared)


def pod_env(port: int, wiring: Wiring) -> dict[str, str]:
    """The demo's pod settings, plus storage rules, targets and the deploy hook; retries are
    short (1 s, doubling to 5 s) so that a spell of failures is recovered from within seconds."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("CONSUMER_")}
    rules = [{"bucket": BUCKET, "prefix": MAIL_PREFIX, "processor": "import-jobs"}]
    return {
        **inherited, "PYTHONUNBUFFERED": "1", "STORAGE_EMULATOR_HOST": wiring.gcs_url,
        "CONSUMER_BIND": f"127.0.0.1:{port}", "CONSUMER_DATABASE_URL": wiring.database_url,
        "CONSUMER_LOCAL_MODE": "true", "CONSUMER_LOCAL_TICK_SECONDS": "0",
        "CONSUMER_WORKERS": "2", "CONSUMER_LOG_LEVEL": "WARNING",  # bench.chaos.diagnose reads them
        "CONSUMER_SMTP_HOST": "127.0.0.1", "CONSUMER_SMTP_PORT": str(wiring.smtp_port),
        "CONSUMER_SMTP_SECURITY": "none", "CONSUMER_MAIL_FROM": MAIL_FROM,
        "CONSUMER_ACK_DEADLINE_SECONDS": str(ACK_DEADLINE_SECONDS),
        "CONSUMER_SAFETY_MARGIN_SECONDS": "2", "CONSUMER_TICK_PERIODS": "sweep=1",
        "CONSUMER_TICK_MAX_AGE_PERIODS": str(TICK_MAX_AGE_PERIODS),
        "CONSUMER_MAX_ATTEMPTS": "1000", "CONSUMER_JOB_MAX_ATTEMPTS": "1000",
        "CONSUMER_JOB_RETRY_BASE_SECONDS": "1", "CONSUMER_JOB_RETRY_MAX_SECONDS": "5",
        "CONSUMER_STORAGE_RULES": json.dumps(rules),
        "CONSUMER_HTTP_TARGETS": targets(wiring.target_url),
        "CONSUMER_DEPLOY_HOOK_SECRETS": HOOK_SECRET,
        "TMPDIR": str(wiring.workdir / "tmp"),  # a killed pod's metrics directory goes with it
    }  # fmt: skip


class Pods:
    """``pods.kill(i)`` plays a crash; ``pods.start(i)`` brings pod ``i`` back on its port."""

    def __init__(self, ports: list[int], wiring: Wiring) -> None:
        self.wiring = wiring
        self.ports = ports
        self.children: list[Child | None] = [None] * len(ports)
        self.starts = [0] * len(ports)

    def start_all(self) -> None:
        """All at once (each start is mostly waiting for imports on a busy machine)."""
        with ThreadPoolExecutor(len(self.ports)) as pool:
            list(pool.map(self.start, range(len(self.ports))))

    def start(self, index: int) -> None:
        """Until the pod answers ``/healthz``: a pod that exits at start (the database is down at
        that moment) is started again a second later, as Kubernetes restarts a crashed one."""
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                self._start_once(index, deadline - time.monotonic())
                return
            except RuntimeError:
                if time.monotonic() + RESTART_BACKOFF_SECONDS >= deadline:
                    raise
                time.sleep(RESTART_BACKOFF_SECONDS)

    def _start_once(self, index: int, timeout: float) -> None:
        port = self.ports[index]
        self.starts[index] += 1
        log = self.wiring.workdir / f"pod-{index + 1}.{self.starts[index]}.log"
        (self.wiring.workdir / "tmp").mkdir(exist_ok=True)
        command = [sys.executable, "-m", "consumer", "serve"]
        child = spawn(f"pod-{index + 1}", command, log, pod_env(port, self.wiring))
        wait_until(child, lambda: _healthy(port), timeout=max(1.0, timeout))
        self.children[index] = child

    def kill(self, index: int) -> set[int]:
        """SIGKILL pod ``index``'s process group; returns the PIDs that died (its workers')."""
        child = self.children[index]
        if child is None:
            return set()
        pids = {child.pid, *descendants(child.pid)}
        child.kill()
        self.children[index] = None
        return pids

    def workers(self, index: int) -> set[int]:
        """The PIDs of pod ``index``'s gunicorn workers now (none while it is down)."""
        child = self.children[index]
        return descendants(child.pid) if child is not None else set()

    def freeze(self, index: int, worker: int | None = None) -> set[int]:
        """SIGSTOP pod ``index``'s process group (the arbiter and its workers), or only
        ``worker``; returns the PIDs frozen."""
        child = self.children[index]
        if child is None:
            return set()
        if worker is not None:
            with suppress(ProcessLookupError):
                os.kill(worker, signal.SIGSTOP)
            return {worker}
        frozen = {child.pid, *descendants(child.pid)}
        with suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGSTOP)
        return frozen

    def thaw(self, index: int) -> None:
        """SIGCONT to pod ``index``'s whole group: it resumes whatever was frozen, and a worker
        that died meanwhile (gunicorn ends one that stops beating) is never signalled by a PID
        that may have been reused; the group lives as long as its arbiter."""
        child = self.children[index]
        if child is not None:
            with suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGCONT)

    def stop_all(self) -> None:
        live = [child for child in self.children if child is not None]
        if live:
            with ThreadPoolExecutor(len(live)) as pool:
                list(pool.map(lambda child: child.stop(timeout=STOP_SECONDS), live))

    def live(self) -> list[int]:
        """Ports of the pods that are up now."""
        return [port for port, child in zip(self.ports, self.children, strict=True) if child]


def _healthy(port: int) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).ok
    except requests.RequestException:
        return False
