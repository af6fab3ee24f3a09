"""``triggers/local/up`` and ``down``: the stack starts, its scheduler's ticks reach the service
through a push subscription, uploads reach it as notifications, and ``down`` stops exactly the
processes ``up`` started."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.inbox.store import Inbox
from tests.conftest import Server, settings_env
from triggers.local import stack

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    return state != "Z"


def script(name: str, state: Path, *args: str) -> str:
    env = {**os.environ, "LOCAL_STACK_DIR": str(state)}
    command = [str(ROOT / "triggers" / "local" / name), *args]
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_up_wires_everything_and_down_stops_it(sqlite_url: str, tmp_path: Path) -> None:
    if reason := stack.missing():
        pytest.skip(reason)
    settings = Settings(database_url=sqlite_url, local_mode=True)
    rules = json.dumps([{"bucket": "uploads", "processor": "import-jobs"}])
    gcs_port = stack.free_port()
    env = settings_env(settings, CONSUMER_STORAGE_RULES=rules,
                       STORAGE_EMULATOR_HOST=f"http://127.0.0.1:{gcs_port}")  # fmt: skip
    server = Server(env, workers=1)
    state = tmp_path / "stack"
    pids: dict[str, int] = {}
    try:
        output = script(
            "up", state, "--pubsub-port", str(stack.free_port()), "--gcs-port", str(gcs_port),
            "--endpoint", f"{server.url}/push", "--tick-seconds", "1", "--task", "cleanup",
        )  # fmt: skip
        assert f"export STORAGE_EMULATOR_HOST=http://127.0.0.1:{gcs_port}" in output
        pids = {name: entry["pid"] for name, entry in
                json.loads((state / "pids.json").read_text()).items()}  # fmt: skip
        assert set(pids) == {"pubsub-emulator", "fake-gcs-server", "scheduler"}
        assert all(alive(pid) for pid in pids.values())

        bucket = stack.storage_client(f"http://127.0.0.1:{gcs_port}").bucket("uploads")
        blob = bucket.blob("hello.csv")
        blob.upload_from_string(b"to\nsomeone@example.com\n", content_type="text/csv")
        inbox = Inbox(make_engine(sqlite_url))
        deadline = time.monotonic() + 60
        keys: set[str] = set()
        while time.monotonic() < deadline and not (
            any(key.startswith("tick:cleanup:") for key in keys)
            and f"storage:uploads/hello.csv#{blob.generation}:OBJECT_FINALIZE" in keys
        ):
            time.sleep(0.3)
            keys = {row.key for row in inbox.list(limit=100)}
        assert any(key.startswith("tick:cleanup:") for key in keys), keys
        assert f"storage:uploads/hello.csv#{blob.generation}:OBJECT_FINALIZE" in keys
        inbox.engine.dispose()
    finally:
        stopped = script("down", state)
        server.stop()
    assert stopped.count("stopped ") == 3
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(alive(pid) for pid in pids.values()):
        time.sleep(0.2)
    assert not any(alive(pid) for pid in pids.values())
    assert not (state / "pids.json").exists()
