"""Missing push authentication refuses to start with a clear message; local mode has to be asked
for and says so loudly at every worker start."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from consumer.config.settings import Settings
from consumer.errors import SettingsError
from consumer.http.app import create_app
from consumer.service import Service
from tests.conftest import Server, free_port, gunicorn_command, server_env

NOT_CONFIGURED = "push authentication is not configured"
LOCAL_WARNING = "LOCAL MODE: push requests are NOT authenticated"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, NOT_CONFIGURED),
        ({"CONSUMER_LOCAL_MODE": "false"}, NOT_CONFIGURED),
        ({"CONSUMER_PUSH_AUDIENCE": "https://x.example.com/push"}, "must be set together"),
        (
            {"CONSUMER_PUSH_SERVICE_ACCOUNTS": "a@b.iam.gserviceaccount.com"},
            "must be set together",
        ),
        (
            {"CONSUMER_LOCAL_MODE": "true", "CONSUMER_PUSH_AUDIENCE": "https://x.example.com"},
            "must be set together",
        ),
        (
            {"CONSUMER_PUSH_TOKEN": "t" * 32, "CONSUMER_OIDC_CERTS_URL": "http://certs.example"},
            "CONSUMER_OIDC_CERTS_URL: must be https://",
        ),
        (
            {"CONSUMER_PUSH_TOKEN": "t" * 32, "CONSUMER_OIDC_CLOCK_SKEW_SECONDS": "3600"},
            "CONSUMER_OIDC_CLOCK_SKEW_SECONDS must be 0..300",
        ),
    ],
)
def test_settings_without_usable_push_authentication_are_refused(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)


def test_each_way_of_authenticating_is_accepted() -> None:
    smtp = {  # required outside local mode
        "CONSUMER_SMTP_HOST": "smtp.example.com", "CONSUMER_SOURCES": "consumer-push=tick",
    }  # fmt: skip
    oidc = {
        **smtp,
        "CONSUMER_PUSH_AUDIENCE": "https://consumer.example.com/push",
        "CONSUMER_PUSH_SERVICE_ACCOUNTS": "a@p.iam.gserviceaccount.com,b@p.iam.gserviceaccount.com",
    }
    assert Settings.from_env(oidc).auth.push_service_accounts == (
        "a@p.iam.gserviceaccount.com",
        "b@p.iam.gserviceaccount.com",
    )
    token = "s3cret-" * 3
    assert Settings.from_env({**smtp, "CONSUMER_PUSH_TOKEN": token}).auth.push_token == token
    assert Settings.from_env({"CONSUMER_LOCAL_MODE": "true"}).local_mode


def test_the_cli_refuses_to_serve_without_authentication(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", "from consumer.cli.main import main; main()", "serve"],
        env=server_env({}),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert NOT_CONFIGURED in result.stderr
    assert "CONSUMER_LOCAL_MODE=true" in result.stderr


@pytest.mark.slow
def test_gunicorn_refuses_to_boot_without_authentication(tmp_path: Path) -> None:
    result = subprocess.run(
        gunicorn_command(free_port(), workers=1),
        env=server_env({"CONSUMER_DATABASE_URL": f"sqlite:///{tmp_path / 'c.db'}"}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert NOT_CONFIGURED in result.stderr


def test_local_mode_warns_even_when_the_log_level_is_quieter(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    logger = logging.getLogger("consumer")
    previous = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with caplog.at_level(logging.ERROR, logger="consumer"):
            create_app(Service.of(Settings(database_url=sqlite_url, local_mode=True)))
    finally:
        logger.setLevel(previous)
    assert any(LOCAL_WARNING in record.getMessage() for record in caplog.records)


@pytest.mark.slow
def test_local_mode_warns_at_every_worker_start(sqlite_url: str, tmp_path: Path) -> None:
    env = {
        "CONSUMER_DATABASE_URL": sqlite_url,
        "CONSUMER_LOCAL_MODE": "true",
        "CONSUMER_LOG_LEVEL": "ERROR",
    }
    with Server(env, workers=3, output=tmp_path / "out.log") as server:
        deadline = time.monotonic() + 30
        while server.text().count(LOCAL_WARNING) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server.text().count(LOCAL_WARNING) == 3
