"""``consumer serve`` runs gunicorn in its own process: stopping it stops every worker; bad plugins
and bad settings are one line before any worker boots; ``CONSUMER_LOCAL_TICK_SECONDS`` counts."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from consumer.demo.processes import descendants
from tests.conftest import free_port, server_env, wait_until

pytestmark = pytest.mark.slow
CONSUMER = [sys.executable, "-m", "consumer"]


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """``server_env`` with a SQLite file in ``tmp_path`` unless ``extra`` names a database."""
    return server_env({"CONSUMER_DATABASE_URL": f"sqlite:///{tmp_path / 's.db'}", **extra})


def children(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc: no process of ours is touched)."""
    return descendants(pid)


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_stopping_serve_stops_its_workers(tmp_path: Path, stop: signal.Signals) -> None:
    port = free_port()
    command = [*CONSUMER, "serve", "--local", "--bind", f"127.0.0.1:{port}", "--workers", "2"]
    process = subprocess.Popen(
        command, env=clean_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_until(lambda: requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).ok)
        # One worker answering does not mean the arbiter has forked the second yet.
        wait_until(lambda: len(children(process.pid)) >= 2)
        workers = children(process.pid)
        idle = requests.Session()  # a kept-alive idle connection must not hold the stop
        assert idle.get(f"http://127.0.0.1:{port}/healthz", timeout=5).ok
        process.send_signal(stop)
        assert process.wait(timeout=20) is not None
        idle.close()
        with pytest.raises(requests.ConnectionError):
            requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in workers if alive(pid)], "a worker outlived serve"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_bad_plugin_is_one_line_before_any_worker(tmp_path: Path) -> None:
    env = clean_env(tmp_path, CONSUMER_PLUGINS="no_such_plugin_module")
    result = subprocess.run(
        [*CONSUMER, "serve", "--local", "--bind", f"127.0.0.1:{free_port()}"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "CONSUMER_PLUGINS" in lines[0] and "no_such_plugin_module" in lines[0]
    assert "Traceback" not in result.stderr and "Booting worker" not in result.stderr


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("CONSUMER_TICK_PERIODS", "sweep=99999999999999999999"),
        ("CONSUMER_OIDC_CERTS_URL", "http://127.0.0.1:1@evil.example/certs"),
        ("CONSUMER_WORKERS", "100000"),
        ("CONSUMER_PLUGINS", "no_such_plugin_module"),  # found when the app is built
    ],
)
def test_a_bad_setting_is_one_line_and_a_nonzero_exit(
    tmp_path: Path, variable: str, value: str
) -> None:
    env = clean_env(tmp_path, CONSUMER_LOCAL_MODE="true", **{variable: value})
    for command in (
        [*CONSUMER, "serve", "--local"],
        [sys.executable, "-m", "gunicorn", "--config", "python:consumer.gunicorn_conf",
         "consumer.wsgi:asgi()"],
        [sys.executable, "-c", "import consumer.wsgi as w; w.asgi()"],
    ):  # fmt: skip
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode != 0, command
        assert variable in result.stderr, (command, result.stderr)
        assert "Traceback" not in result.stderr, (command, result.stderr)


def test_local_tick_seconds_from_the_environment_is_honoured(tmp_path: Path) -> None:
    """The default local tick is 10 s; a 1 s setting must tick several times in 6 s."""
    port = free_port()
    log = tmp_path / "serve.log"
    env = clean_env(tmp_path, CONSUMER_LOCAL_TICK_SECONDS="1")
    with log.open("w") as sink:
        process = subprocess.Popen(
            [*CONSUMER, "serve", "--local", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
            env=env, stdout=sink, stderr=sink,
        )  # fmt: skip
    try:
        wait_until(lambda: requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).ok)
        time.sleep(6)
        lines = log.read_text().splitlines()
        ticks = [line for line in lines if '"key": "tick:sweep:' in line and '"done"' in line]
        assert len(ticks) >= 3, log.read_text()[-2000:]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
