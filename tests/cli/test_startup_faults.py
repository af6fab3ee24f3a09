"""A fault at start-up is one line and exit 2 from every entry point, with no traceback: a bad
setting, a plugin that fails to load, a database that is not migrated, and (for the one-shot
commands) a database that cannot be reached. A server that cannot reach its database starts all
the same and stays unready until it answers (``test_container_command``): an outage must take
pods out of the load balancer, not restart them in a loop."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import TEST_SOURCES, free_port, server_env

FAULTS = {
    "bad setting": ({"CONSUMER_ACK_DEADLINE_SECONDS": "5"}, "CONSUMER_ACK_DEADLINE_SECONDS"),
    "plugin fails to load": ({"CONSUMER_PLUGINS": "no.such.plugin"}, "no.such.plugin"),
    "not migrated": ({}, "not migrated"),
    "unreachable": ({}, "cannot use the database"),
}
COMMANDS = {
    "sweep --once": ["sweep", "--once"],
    "inbox replay": ["inbox", "replay", "tick:sweep:2026-01-01T00:00:00+00:00"],
    "jobs list": ["jobs", "list"],
    "status": ["status"],
    "pull": ["pull", "projects/p/subscriptions/s"],
    "dashboard": ["dashboard", "--local", "--bind", f"127.0.0.1:{free_port()}"],
}
SERVING = {"pull", "dashboard"}
"""Long-running entry points: an unreachable database is logged, not a fault."""


def fault_env(tmp_path: Path, fault: str) -> dict[str, str]:
    empty = tmp_path / f"{fault.replace(' ', '-')}.db"
    empty.touch()  # exists, but no table: not migrated
    url = f"sqlite:///{empty}"
    if fault == "unreachable":
        url = f"postgresql+psycopg://consumer@127.0.0.1:{free_port()}/consumer?connect_timeout=2"
    extra, _ = FAULTS[fault]
    if fault != "not migrated" and fault != "unreachable":
        url = f"sqlite:///{tmp_path / 'missing-is-never-reached.db'}"
    return server_env(
        {"CONSUMER_DATABASE_URL": url, "CONSUMER_LOCAL_MODE": "true", "PUBSUB_EMULATOR_HOST":
         f"127.0.0.1:{free_port()}", **extra}
    )  # fmt: skip


def assert_one_line(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    naming = [line for line in lines if expected in line]
    assert len(naming) == 1, result.stderr
    others = [line for line in lines if line not in naming]
    assert all('"severity": "INFO"' in line for line in others), result.stderr  # gunicorn's banner


def run(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.slow
def test_every_command_fails_one_way(tmp_path: Path) -> None:
    cases = [
        (name, fault)
        for name in COMMANDS
        for fault in FAULTS
        if not (fault == "unreachable" and name in SERVING)
    ]

    def attempt(case: tuple[str, str]) -> tuple[str, str, subprocess.CompletedProcess[str]]:
        name, fault = case
        command = [sys.executable, "-m", "consumer", *COMMANDS[name]]
        return name, fault, run(command, fault_env(tmp_path, fault), tmp_path)

    with ThreadPoolExecutor(4) as pool:
        for name, fault, result in pool.map(attempt, cases):
            print(name, fault, result.returncode, result.stderr.strip()[-200:])
            assert_one_line(result, FAULTS[fault][1])


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["bad setting", "plugin fails to load", "not migrated"])
@pytest.mark.parametrize("server", ["consumer serve", "container command"])
def test_every_server_fails_one_way(tmp_path: Path, server: str, fault: str) -> None:
    bind = f"127.0.0.1:{free_port()}"
    env = {k: v for k, v in fault_env(tmp_path, fault).items() if k != "CONSUMER_LOCAL_MODE"}
    env.update(CONSUMER_PUSH_TOKEN="t" * 32, CONSUMER_BIND=bind, CONSUMER_SMTP_HOST="127.0.0.1",
               CONSUMER_SOURCES=TEST_SOURCES)  # fmt: skip
    assert_one_line(run(server_command(server, bind), env, tmp_path), FAULTS[fault][1])


def server_command(server: str, bind: str) -> list[str]:
    """``consumer serve`` on ``bind``, or the container's gunicorn command (bind from env)."""
    if server == "consumer serve":
        return [sys.executable, "-m", "consumer", "serve", "--bind", bind]
    return [sys.executable, "-m", "gunicorn", "--config", "python:consumer.http.gunicorn_conf",
            "consumer.http.wsgi:asgi()"]  # fmt: skip
