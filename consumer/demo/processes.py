"""Child processes of the demo: started in their own process group on 127.0.0.1, stopped (or
killed, to play a crash) by that group's id only, and never left behind on Ctrl-C. The local
stack (triggers/local) starts its emulators with the same helpers."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

SDK_ROOTS = ("/usr/lib/google-cloud-sdk", "/usr/share/google-cloud-sdk", "/opt/google-cloud-sdk")
EMULATOR_SCRIPT = "platform/pubsub-emulator/bin/cloud-pubsub-emulator"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class Child:
    """A process group the demo started; ``log`` keeps its output for a failure message."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole group: the crash the demo plays (no clean-up runs)."""
        self._signal_group(signal.SIGKILL)
        self.process.wait()

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM the group, then SIGKILL what is left after ``timeout``."""
        if self.alive():
            self._signal_group(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=timeout)
        self._signal_group(signal.SIGKILL)  # stragglers of a group whose leader already left
        self.process.wait()

    def _signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)

    def tail(self, size: int = 1500) -> str:
        return self.log.read_text(errors="replace")[-size:] if self.log.exists() else ""


def spawn(name: str, command: Sequence[str], log: Path, env: dict[str, str]) -> Child:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            list(command), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, start_new_session=True,
        )  # fmt: skip
    return Child(name, process, log)


def wait_until(child: Child, ready: Callable[[], bool], timeout: float) -> None:
    """Return once ``ready()``; if the child exits or times out, stop its group (nothing is left
    running that nobody will stop) and raise with its log's tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not child.alive():
            child.stop()
            raise RuntimeError(f"{child.name} exited early:\n{child.tail()}")
        if ready():
            return
        time.sleep(0.1)
    child.stop()
    raise RuntimeError(f"{child.name} was not ready within {timeout:.0f}s:\n{child.tail()}")


def start_pubsub(
    port: int, log: Path, project: str, env: Mapping[str, str], timeout: float = 90
) -> Child:
    """Google's Pub/Sub emulator on 127.0.0.1:``port`` for ``project``, once it listens."""
    script = pubsub_emulator()
    if script is None:
        raise RuntimeError("Google's Pub/Sub emulator (or java, which it needs) is not installed")
    command = [str(script), "--host=127.0.0.1", f"--port={port}", f"--projects={project}"]
    child = spawn("pubsub-emulator", command, log, dict(env))
    wait_until(child, lambda: listening(port), timeout)
    return child


def pubsub_emulator() -> Path | None:
    """Google's ``cloud-pubsub-emulator`` script from the gcloud SDK, when it and java exist."""
    if shutil.which("java") is None:
        return None
    return emulator_script()


def emulator_script() -> Path | None:
    """The SDK's ``cloud-pubsub-emulator`` script (it ``exec``s java, so its PID is the JVM)."""
    roots = [os.environ.get("CLOUDSDK_ROOT_DIR", ""), *SDK_ROOTS]
    if gcloud := shutil.which("gcloud"):
        roots.append(str(Path(gcloud).resolve().parent.parent))
    for root in filter(None, roots):
        script = Path(root) / EMULATOR_SCRIPT
        if script.is_file():
            return script
    return None


def descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid``, read from /proc (a pod's gunicorn workers)."""
    found: set[int] = set()
    pending = [pid]
    while pending:
        parent = pending.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    pending.append(child)
    return found
