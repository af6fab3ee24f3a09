"""``consumer serve`` runs gunicorn in its own process: stopping it stops every worker; bad plugins
and bad settings are one line before any worker boots; ``CONSUMER_LOCAL_TICK_SECONDS`` counts; a
server that will not stop is killed with its workers by the tests' ``stop_process``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path

import pytest
import requests

from consumer.db.engine import make_engine
from consumer.demo.processes import descendants
from consumer.wire.envelopes_out import wrapped_body
from tests.conftest import free_port, server_env, stop_process, wait_until
from tests.plugins.effects import effect_rows

pytestmark = pytest.mark.slow
CONSUMER = [sys.executable, "-m", "consumer"]


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """``server_env`` with a SQLite file in ``tmp_path`` unless ``extra`` names a database."""
    return server_env({"CONSUMER_DATABASE_URL": f"sqlite:///{tmp_path / 's.db'}", **extra})


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status


def serving_two_workers(tmp_path: Path) -> tuple[int, subprocess.Popen[bytes]]:
    """``consumer serve --local`` with two workers, once both are forked (one worker answering
    does not mean the arbiter has forked the second yet); the caller stops it."""
    port = free_port()
    command = [*CONSUMER, "serve", "--local", "--bind", f"127.0.0.1:{port}", "--workers", "2"]
    process = subprocess.Popen(
        command, env=clean_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_until(lambda: requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).ok)
        wait_until(lambda: len(descendants(process.pid)) >= 2)
    except BaseException:
        stop_process(process)
        raise
    return port, process


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_stopping_serve_stops_its_workers(tmp_path: Path, stop: signal.Signals) -> None:
    port, process = serving_two_workers(tmp_path)
    try:
        workers = descendants(process.pid)
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
        stop_process(process)


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
        [sys.executable, "-m", "gunicorn", "--config", "python:consumer.http.gunicorn_conf",
         "consumer.http.wsgi:asgi()"],
        [sys.executable, "-c", "import consumer.http.wsgi as w; w.asgi()"],
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
        stop_process(process, timeout=60)


def test_a_server_that_will_not_stop_is_killed_with_its_workers(tmp_path: Path) -> None:
    """``stop_process``'s fallback: the worker is stuck in a 60 s handler and the arbiter gets a
    signal it does not stop on (gunicorn reopens its logs on SIGUSR1), so after the timeout the
    arbiter and the stuck worker are both killed by PID, not left running past the test."""
    port = free_port()
    env = clean_env(tmp_path, CONSUMER_PLUGINS="tests.plugins.effects")
    command = [*CONSUMER, "serve", "--local", "--bind", f"127.0.0.1:{port}", "--workers", "1",
               "--tick-seconds", "0"]  # fmt: skip
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    engine = make_engine(env["CONSUMER_DATABASE_URL"])
    stuck = threading.Thread(target=push_quietly, args=(port, {"task": "effect", "hang": "60"}))
    try:
        wait_until(lambda: requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).ok)
        stuck.start()
        wait_until(lambda: effect_rows(engine, "started") != [])
        workers = descendants(process.pid)
        started = time.monotonic()
        stop_process(process, signal.SIGUSR1, timeout=2)
        assert process.returncode == -signal.SIGKILL
        wait_until(lambda: not [pid for pid in workers if alive(pid)], timeout=5, every=0.1)
        assert time.monotonic() - started < 8
    finally:
        stop_process(process)
        engine.dispose()
    stuck.join(timeout=10)


def push_quietly(port: int, attributes: dict[str, str]) -> None:
    """A push whose answer never comes: the server is killed while it runs."""
    body = wrapped_body(attributes=attributes)
    with suppress(requests.RequestException):
        requests.post(f"http://127.0.0.1:{port}/push", json=body, timeout=90)


def test_one_workers_abort_leaves_the_pods_metrics_directory(tmp_path: Path) -> None:
    """``serve`` makes the workers' metrics directory and removes it when it stops. A worker is
    forked inside ``serve``'s own call, so a worker's exit (gunicorn aborts a worker whose
    heartbeat is stale, as after a pause) unwound through the same clean-up and removed the
    directory under the pod's other workers: every request after it answered 500."""
    port, process = serving_two_workers(tmp_path)
    try:
        directory = _metrics_directory_of(process.pid)
        assert Path(directory).is_dir()
        aborted = min(descendants(process.pid))
        os.kill(aborted, signal.SIGABRT)
        wait_until(lambda: _replaced(process.pid, aborted))
        assert Path(directory).is_dir(), "a worker's exit removed the pod's metrics directory"
        push = f"http://127.0.0.1:{port}/push"
        statuses = [requests.post(push, json=wrapped_body(b"{}"), timeout=30) for _ in range(6)]
        assert [answer.status_code for answer in statuses] == [200] * 6
    finally:
        stop_process(process)


def _replaced(serve: int, worker: int) -> bool:
    workers = descendants(serve)
    return worker not in workers and len(workers) >= 2


def _metrics_directory_of(pid: int) -> str:
    """The ``PROMETHEUS_MULTIPROC_DIR`` that ``serve`` set for itself (it restarts with it)."""
    for child in [pid, *descendants(pid)]:
        entries = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
        for entry in entries:
            if entry.startswith(b"PROMETHEUS_MULTIPROC_DIR="):
                return entry.split(b"=", 1)[1].decode()
    raise AssertionError("serve set no metrics directory")
