"""Start-up does its work once per process: each plugin's ``register`` (counted by
``tests.plugins.counted``), the settings' validation and the push authenticator, whichever entry
point starts the process: ``consumer.http.wsgi:asgi()``, ``consumer.http.wsgi:app()`` under the
production worker, ``consumer serve``, the CLI's context."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from consumer.cli.context import CliContext
from consumer.cli.main import main
from consumer.config.settings import Settings
from consumer.dashboard import wsgi as dashboard_wsgi
from consumer.db.engine import make_engine
from consumer.errors import SettingsError
from consumer.http import app as app_module
from consumer.http import serve, wsgi
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.service import compose
from consumer.sources.pull import PullConsumer
from consumer.wire.envelope import parse_push
from consumer.wire.envelopes_out import tick_body
from consumer.wire.timeutil import floor_to_period, utcnow
from tests.conftest import TEST_SOURCES, Server, free_port, server_env, settings_env, wait_until
from tests.plugins import counted

TOKEN = "t" * 32


@pytest.fixture
def app_settings(sqlite_url: str) -> Settings:
    """A server that authenticates pushes (so it builds an authenticator) and loads the plugin."""
    return Settings.of(database_url=sqlite_url, push_token=TOKEN, plugins=(counted.__name__,))


@pytest.fixture
def env(app_settings: Settings) -> dict[str, str]:
    return settings_env(app_settings, CONSUMER_PUSH_TOKEN=TOKEN, CONSUMER_SMTP_HOST="127.0.0.1",
                        CONSUMER_SOURCES=TEST_SOURCES)  # fmt: skip


@pytest.fixture
def calls(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """This process's environment is the server's ``env``; counts the settings validations and
    the authenticators start-up makes in it (``registers_since`` counts ``register``)."""
    for key in [key for key in os.environ if key.startswith("CONSUMER_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    counter: Counter[str] = Counter()
    rules, authenticator_for = Settings._rules, app_module.authenticator_for

    def counted_rules(settings: Settings, serves_push: bool) -> Any:
        counter["validations"] += 1
        return rules(settings, serves_push)

    def counted_authenticator(settings: Settings) -> Any:
        counter["authenticators"] += 1
        return authenticator_for(settings)

    monkeypatch.setattr(Settings, "_rules", counted_rules)
    for module in (app_module, wsgi):
        monkeypatch.setattr(module, "authenticator_for", counted_authenticator)
    for module in (wsgi, serve):  # the test session's own logging stays as it is
        monkeypatch.setattr(module, "configure_logging", lambda *args: None)
    return counter


def registers_since(before: int) -> int:
    return len(counted.registered) - before


ONCE = {"registers": 1, "validations": 1, "authenticators": 1}


def test_the_composition_root_registers_once_and_reads_the_plugins_section(
    env: dict[str, str],
) -> None:
    before = len(counted.registered)
    service = compose({**env, "CONSUMER_COUNTED_LABEL": "mine"})
    assert "counted" in service.registry.tasks
    assert service.settings.section(counted.CountedSettings).label == "mine"
    assert registers_since(before) == 1


def test_an_asgi_worker_starts_once(calls: Counter[str]) -> None:
    before = len(counted.registered)
    wsgi.asgi()
    assert {**calls, "registers": registers_since(before)} == ONCE


def test_a_plain_app_under_the_production_worker_starts_once(calls: Counter[str]) -> None:
    """``consumer.http.worker`` puts ``consumer.http.wsgi:app()`` behind the bridge with
    ``bridged``."""
    before = len(counted.registered)
    wsgi.bridged(wsgi.app())
    assert {**calls, "registers": registers_since(before)} == ONCE


def test_serve_checks_the_plugins_once_before_gunicorn_starts(
    calls: Counter[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The arbiter's pre-start check composes once; the workers compose their own
    (``test_each_process_of_consumer_serve_registers_once``)."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))  # no restart
    served: list[Settings] = []
    monkeypatch.setattr(serve.Server, "run", lambda server: served.append(server.settings))
    before = len(counted.registered)
    serve.run(lambda: compose(os.environ), {})
    assert len(served) == 1 and registers_since(before) == 1
    assert calls == {"validations": 1}


def test_a_command_builds_its_registry_from_the_plugins_its_settings_loaded(
    calls: Counter[str],
) -> None:
    before = len(counted.registered)
    cli = CliContext()
    assert "counted" in cli.registry.tasks and cli.settings.plugins == (counted.__name__,)
    assert registers_since(before) == 1


def test_the_status_command_registers_each_plugin_once(calls: Counter[str]) -> None:
    before = len(counted.registered)
    result = CliRunner().invoke(main, ["status"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "counted" in result.output  # the plugin's tick task is in the overview
    assert registers_since(before) == 1


@pytest.mark.parametrize(
    "args",
    [("sweep", "--once"), ("jobs", "list"), ("inbox", "list"), ("files", "list"),
     ("deploy", "runs"), ("settings",)],
)  # fmt: skip
def test_each_command_registers_each_plugin_once(
    calls: Counter[str], args: tuple[str, ...]
) -> None:
    before = len(counted.registered)
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert registers_since(before) == 1


def test_replay_registers_each_plugin_once(calls: Counter[str], app_settings: Settings) -> None:
    """The replay runs the stored tick with the registry its command composed: the plugin's
    task is found (``done``), and registered once."""
    engine = make_engine(app_settings.database_url)
    without_plugin = build_registry(app_settings.with_values(plugins=()))
    hour = floor_to_period(utcnow(), 3600)  # a slot of both schedules (60 s without the plugin)
    body = json.dumps(tick_body("counted", publish_time=hour)).encode()
    unroutable = Dispatcher(app_settings, engine, without_plugin).dispatch(parse_push({}, body))
    assert unroutable.kind.value == "unroutable"
    key = unroutable.key
    engine.dispose()
    before = len(counted.registered)
    result = CliRunner().invoke(main, ["inbox", "replay", key], catch_exceptions=False)
    assert result.exit_code == 0 and '"outcome": "done"' in result.output, result.output
    assert registers_since(before) == 1


def test_pull_registers_each_plugin_once(
    calls: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[PullConsumer] = []
    monkeypatch.setattr(PullConsumer, "run", lambda consumer, stop: ran.append(consumer))
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", f"127.0.0.1:{free_port()}")  # never reached
    before = len(counted.registered)
    result = CliRunner().invoke(
        main, ["pull", "projects/p/subscriptions/s"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert len(ran) == 1 and "counted" in ran[0].dispatcher.registry.tasks
    assert registers_since(before) == 1


def test_the_dashboard_registers_each_plugin_once(
    calls: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``consumer dashboard`` composes (and checks) once, then hands over to gunicorn, whose
    worker composes once in its own process (``consumer.dashboard.wsgi:app()``)."""
    execs: list[list[str]] = []
    monkeypatch.setattr(os, "execvpe", lambda file, args, env: execs.append(args))
    monkeypatch.setenv("CONSUMER_DASHBOARD_TOKEN", "d" * 32)
    before = len(counted.registered)
    result = CliRunner().invoke(main, ["dashboard"], catch_exceptions=False)
    assert result.exit_code == 0 and execs, result.output
    assert registers_since(before) == 1
    dashboard_wsgi.app()
    assert registers_since(before) == 2


def test_changed_settings_are_validated_again(app_settings: Settings) -> None:
    """A validation is remembered per (frozen) object, never for a changed copy."""
    app_settings.validate()
    with pytest.raises(SettingsError, match="push authentication is not configured"):
        app_settings.with_values(push_token="").validate()


def wait_for_processes(log: Path, count: int) -> dict[int, int]:
    """``register`` calls by PID once ``count`` processes made some, and each had a second to
    finish booting (a second call, if any, follows the first within milliseconds)."""
    wait_until(lambda: len(counted.registrations(str(log))) >= count)
    time.sleep(1)
    return counted.registrations(str(log))


@pytest.mark.slow
@pytest.mark.parametrize("app", ["consumer.http.wsgi:asgi()", "consumer.http.wsgi:app()"])
def test_each_process_of_gunicorn_registers_once(
    env: dict[str, str], start_server: Callable[..., Server], tmp_path: Path, app: str
) -> None:
    """The container's command: the arbiter reads the settings (``consumer.http.gunicorn_conf``),
    then
    each worker reads them and loads the plugins, once, its own."""
    log = tmp_path / "registered"
    server = start_server({**env, counted.LOG_ENV: str(log)}, workers=2, app=app)
    by_pid = wait_for_processes(log, 3)
    assert server.process.pid in by_pid
    assert by_pid == dict.fromkeys(by_pid, 1), by_pid


@pytest.mark.slow
def test_each_process_of_consumer_serve_registers_once(env: dict[str, str], tmp_path: Path) -> None:
    """``serve`` reads the settings after its restart only (same PID); its workers load the
    plugins after the fork, each its own."""
    log, port = tmp_path / "registered", free_port()
    command = [sys.executable, "-m", "consumer", "serve", "--bind", f"127.0.0.1:{port}"]
    process = subprocess.Popen(
        [*command, "--workers", "2"],
        env=server_env({**env, counted.LOG_ENV: str(log)}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).ok)
        by_pid = wait_for_processes(log, 3)
        assert process.pid in by_pid
        assert by_pid == dict.fromkeys(by_pid, 1), by_pid
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("variable", "value"),
    [("CONSUMER_PLUGINS", "no_such_plugin_module"), ("CONSUMER_WORKERS", "100000")],
)
def test_bad_settings_stop_serve_after_its_restart_without_leaving_its_metrics_directory(
    tmp_path: Path, variable: str, value: str
) -> None:
    """``serve`` reads its settings only once restarted with a metrics directory of its own: a
    bad setting (or plugin) still stops it before gunicorn, and the directory goes with it."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {"CONSUMER_DATABASE_URL": f"sqlite:///{tmp_path / 's.db'}", variable: value}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "consumer",
            "serve",
            "--local",
            "--bind",
            f"127.0.0.1:{free_port()}",
        ],
        env={**server_env(env), "TMPDIR": str(scratch)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and variable in result.stderr, result.stderr
    assert "Booting worker" not in result.stderr and "Traceback" not in result.stderr
    assert list(scratch.iterdir()) == []
