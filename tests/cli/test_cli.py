"""The real ``consumer`` command in subprocesses: send, inbox, db upgrade, serve."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from tests.conftest import Server, free_port, settings_env, stop_process, wait_until

pytestmark = pytest.mark.slow
CONSUMER = [sys.executable, "-m", "consumer"]


def run(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [*CONSUMER, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_db_upgrade_creates_the_schema_and_is_idempotent(tmp_path: Path) -> None:
    env = {"CONSUMER_DATABASE_URL": f"sqlite:///{tmp_path / 'fresh.db'}"}
    assert "up to date" in run("db", "upgrade", env=env).stdout
    assert "up to date" in run("db", "upgrade", env=env).stdout
    engine = make_engine(env["CONSUMER_DATABASE_URL"])
    assert Inbox(engine).list() == []
    engine.dispose()


def test_send_then_inspect_and_replay(sqlite_url: str, start_server: Callable[..., Server]) -> None:
    settings = Settings(database_url=sqlite_url, local_mode=True)
    server = start_server(settings_env(settings))
    env = {"CONSUMER_DATABASE_URL": sqlite_url, "CONSUMER_LOCAL_MODE": "true"}
    sent = run("send", "tick", "cleanup", "--to", f"{server.url}/push", env=env)
    assert sent.stdout.startswith("200 ") and '"outcome":"done"' in sent.stdout.replace(" ", "")
    # The server has no "effect" task; the plugin used for the replay has.
    unroutable = run("send", "tick", "effect", "--to", f"{server.url}/push", env=env)
    assert '"outcome":"unroutable"' in unroutable.stdout.replace(" ", "")

    key = json.loads(unroutable.stdout.split(" ", 1)[1])["key"]
    listing = run("inbox", "list", "--status", "unroutable", env=env).stdout
    assert key in listing and "cleanup" not in listing
    shown = json.loads(run("inbox", "show", key, env=env).stdout)
    assert shown["status"] == "unroutable" and shown["message"]["attributes"] == {"task": "effect"}

    plugin_env = {**env, "CONSUMER_PLUGINS": "tests.plugins.effects"}
    replayed = json.loads(run("inbox", "replay", key, env=plugin_env).stdout)
    assert replayed["outcome"] == "done"
    engine = make_engine(sqlite_url)
    row = Inbox(engine).get(key)
    engine.dispose()
    assert row is not None and row.status is Status.DONE
    again = run("inbox", "replay", key, env=plugin_env, check=False)
    assert again.returncode != 0 and "not dead, unroutable or failed" in again.stderr


def test_send_reports_an_unreachable_endpoint(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/push"
    result = run("send", "tick", "sweep", "--to", url, env={}, check=False)
    assert result.returncode != 0 and "cannot reach" in result.stderr


def test_serve_refuses_to_start_without_authentication(tmp_path: Path) -> None:
    env = {"CONSUMER_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}"}
    result = run("serve", env=env, check=False)
    assert result.returncode == 2 and "push authentication is not configured" in result.stderr


def test_serve_local_sweeps_an_enqueued_email_within_seconds(tmp_path: Path) -> None:
    """The quickstart: local mode migrates, serves, and its single tick source drives the sweep
    (one slot per local tick) and cleanup."""
    database = f"sqlite:///{tmp_path / 'local.db'}"
    maildir = tmp_path / "maildir"
    port = free_port()
    env = {
        "CONSUMER_DATABASE_URL": database, "CONSUMER_WORKERS": "2",
        "CONSUMER_MAILDIR_PATH": str(maildir),
    }  # fmt: skip
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("CONSUMER_")}
    command = [*CONSUMER, "serve", "--local", "--bind", f"127.0.0.1:{port}", "--tick-seconds", "1"]
    process = subprocess.Popen(
        command, env={**inherited, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_until(lambda: requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5).ok)
        payload = json.dumps({"to": "ann@example.com", "subject": "hello", "text": "from a job"})
        run("jobs", "enqueue", "email", "--payload", payload, env=env)
        wait_until(lambda: any((maildir / "new").glob("*")))
        (delivered,) = (maildir / "new").glob("*")
        assert "Subject: hello" in delivered.read_text()
        engine = make_engine(database)
        keys = [row.key for row in Inbox(engine).list(Status.DONE, limit=500)]
        engine.dispose()
        assert any(key.startswith("tick:cleanup:") for key in keys)
        assert any(key.startswith("tick:sweep:") for key in keys)
    finally:
        stop_process(process, signal.SIGINT, timeout=30)
