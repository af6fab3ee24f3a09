"""Who may use the dashboard: it refuses to start unguarded, and lets in only the admin token or
a verified IAP user; every action is logged with who did it."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
from flask import Flask
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.dashboard.access import CSRF_COOKIE, Access
from consumer.dashboard.app import create_dashboard
from consumer.db.engine import make_engine
from consumer.errors import SettingsError
from consumer.jobs import store
from consumer.service import Service
from tests.conftest import Server
from tests.dashboard.conftest import APP, DASHBOARD_WORKER, TOKEN
from tests.dashboard.iap_keys import AUDIENCE, IapKey, key_server


def dashboard_of(settings: Settings, engine: Engine | None = None) -> Flask:
    """The dashboard for settings built in code (its engine made here unless given)."""
    return create_dashboard(Service.of(settings, engine or make_engine(settings.database_url)))


def test_refuses_to_start_without_authentication_outside_local_mode() -> None:
    with pytest.raises(SettingsError, match="CONSUMER_DASHBOARD_TOKEN"):
        Access.from_settings(Settings())
    assert Access.from_settings(Settings(local_mode=True)).local
    assert Access.from_settings(Settings.of(dashboard_token=TOKEN)).token == TOKEN
    assert Access.from_settings(Settings.of(dashboard_iap_audience=AUDIENCE)).iap is not None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CONSUMER_DASHBOARD_TOKEN", "short"),
        ("CONSUMER_DASHBOARD_IAP_AUDIENCE", "https://dashboard.example.com"),
        ("CONSUMER_DASHBOARD_IAP_KEYS_URL", "http://keys.example.com/jwk"),
        ("CONSUMER_DASHBOARD_IAP_KEYS_URL", "http://127.0.0.1:1@evil.example/jwk"),
    ],
)
def test_bad_authentication_settings_are_refused(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({name: value}, serves_push=False)


def _consumer(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "consumer", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_the_command_refuses_an_unguarded_or_push_port_listener(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "CONSUMER_DATABASE_URL": f"sqlite:///{tmp_path / 'c.db'}"}
    unguarded = _consumer("dashboard", env=env)
    assert unguarded.returncode == 2 and "needs authentication" in unguarded.stderr
    on_push_port = _consumer("dashboard", "--local", "--bind", "127.0.0.1:8080", env=env)
    assert on_push_port.returncode == 2 and "push port" in on_push_port.stderr


def test_an_action_is_logged_with_who_did_it(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = dashboard_of(Settings.of(database_url=sqlite_url, dashboard_token=TOKEN))
    job_id = store.enqueue(
        app.extensions["dashboard"].engine, "report", {}, allow_unknown=True
    ).job_id
    client = app.test_client()
    client.set_cookie(CSRF_COOKIE, "c" * 43)
    form = {"job_id": str(job_id), "csrf": "c" * 43}
    with caplog.at_level(logging.INFO, logger="consumer.dashboard"):
        response = client.post(
            "/actions/cancel-job", data=form, headers={"Authorization": f"Bearer {TOKEN}"}
        )
    assert response.status_code == 200
    (record,) = [r for r in caplog.records if r.getMessage() == "dashboard action"]
    assert (record.who, record.action, record.target, record.ok) == (  # type: ignore[attr-defined]
        "admin-token",
        "cancel-job",
        str(job_id),
        True,
    )


def test_bad_action_input_is_a_clear_4xx(sqlite_url: str) -> None:
    app = dashboard_of(Settings(database_url=sqlite_url, local_mode=True))
    client = app.test_client()
    client.set_cookie(CSRF_COOKIE, "c" * 43)
    for form, status in (
        ({"job_id": "-1"}, 400), ({"job_id": "9" * 40}, 400), ({}, 400),
        ({"job_id": "12345"}, 409),
    ):  # fmt: skip
        response = client.post("/actions/cancel-job", data={**form, "csrf": "c" * 43})
        assert response.status_code == status, form
    assert client.get("/jobs?status=gone").status_code == 400
    assert client.get("/inbox?status=gone").status_code == 400
    assert client.get("/files?status=gone").status_code == 400
    assert client.get("/jobs/999").status_code == 404
    assert client.post("/actions/replay", data={"key": "nope", "csrf": "c" * 43}).status_code == 409


@pytest.mark.slow
def test_iap_users_are_let_in_over_http(
    sqlite_url: str, start_server: Callable[..., Server]
) -> None:
    key = IapKey("iap-1")
    with key_server([key]) as keys:
        env = {
            "CONSUMER_DATABASE_URL": sqlite_url,
            "CONSUMER_DASHBOARD_IAP_AUDIENCE": AUDIENCE,
            "CONSUMER_DASHBOARD_IAP_KEYS_URL": keys.url,
            "CONSUMER_LOG_LEVEL": "WARNING",
        }
        url = start_server(env, workers=1, app=APP, worker=DASHBOARD_WORKER).url
        signed = {"x-goog-iap-jwt-assertion": key.sign()}
        page = requests.get(url + "/", headers=signed, timeout=10)
        assert page.status_code == 200 and "iap:operator@example.com" in page.text
        assert requests.get(url + "/", timeout=10).status_code == 401
        forged = {"x-goog-iap-jwt-assertion": IapKey("iap-1").sign()}
        assert requests.get(url + "/", headers=forged, timeout=10).status_code == 401
        other = {"x-goog-iap-jwt-assertion": key.sign(aud="/projects/1/global/backendServices/2")}
        assert requests.get(url + "/", headers=other, timeout=10).status_code == 401


def test_the_login_form_sets_the_token_cookie(sqlite_url: str) -> None:
    client = dashboard_of(Settings.of(database_url=sqlite_url, dashboard_token=TOKEN)).test_client()
    assert client.get("/").status_code == 401
    assert client.get("/login").status_code == 200
    csrf = client.get_cookie(CSRF_COOKIE)
    assert csrf is not None
    wrong = client.post("/login", data={"token": "x" * len(TOKEN), "csrf": csrf.value})
    assert wrong.status_code == 401 and client.get("/").status_code == 401
    right = client.post("/login", data={"token": TOKEN, "csrf": csrf.value})
    assert right.status_code == 303
    cookie = client.get_cookie("consumer_dashboard_token")
    assert cookie is not None and cookie.http_only and cookie.same_site == "Strict"
    assert client.get("/").status_code == 200
    client.post("/logout", data={"csrf": csrf.value})
    assert client.get("/").status_code == 401


def test_ready_only_once_the_schema_is_at_head(tmp_path: Path, sqlite_url: str) -> None:
    """A dashboard rolled out before the migration Job finished stays out of rotation."""
    bare = f"sqlite:///{tmp_path / 'unmigrated.db'}"
    unmigrated = dashboard_of(Settings.of(database_url=bare, dashboard_token=TOKEN))
    assert unmigrated.test_client().get("/readyz").status_code == 503
    migrated = dashboard_of(Settings.of(database_url=sqlite_url, dashboard_token=TOKEN))
    answer = migrated.test_client().get("/readyz")
    assert answer.status_code == 200 and answer.get_json() == {"status": "ready"}
