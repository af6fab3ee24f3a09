"""The legacy ``?token=`` verification token, and that it never reaches the access log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from flask.testing import FlaskClient

from consumer.config.settings import Settings
from consumer.wire.envelopes_out import wrapped_body
from tests.conftest import Server

TOKEN = "pV8sQ2-legacy-verification-token-7Kd"


@pytest.fixture
def app_settings(sqlite_url: str) -> Settings:
    return Settings.of(database_url=sqlite_url, push_token=TOKEN)


def test_the_right_token_is_accepted(client: FlaskClient) -> None:
    response = client.post(f"/push?token={TOKEN}", json=wrapped_body(data=b"x"))
    assert response.status_code == 200


@pytest.mark.parametrize(
    "query",
    [
        "",
        "?token=",
        "?token=wrong",
        f"?token={TOKEN[:-1]}X",  # same length, last character differs
        f"?token={TOKEN}extra",
        f"?token={TOKEN[:-1]}",
        "?token=%C3%A9%00%FF",  # non-ASCII, a NUL, an invalid UTF-8 byte
        f"?TOKEN={TOKEN}",
        f"?tokens={TOKEN}",
    ],
)
def test_a_wrong_or_missing_token_gets_401(client: FlaskClient, query: str) -> None:
    response = client.post(f"/push{query}", json=wrapped_body(data=b"x"))
    assert response.status_code == 401
    assert response.json == {"outcome": "rejected", "key": "", "error": "missing or invalid token"}


def test_the_token_in_a_header_does_not_count(client: FlaskClient) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Token": TOKEN}
    assert client.post("/push", json=wrapped_body(data=b"x"), headers=headers).status_code == 401


@pytest.mark.slow
def test_the_token_never_reaches_the_access_log(sqlite_url: str, tmp_path: Path) -> None:
    """Run the container's command (``--config python:consumer.http.gunicorn_conf``). A push writes
    its decision line instead of an access line; a GET of /push (405) still writes one."""
    env = {"CONSUMER_DATABASE_URL": sqlite_url, "CONSUMER_PUSH_TOKEN": TOKEN}
    with Server(env, workers=1, output=tmp_path / "out.log") as server:
        push = f"{server.url}/push?token="
        accepted = requests.post(push + TOKEN, json=wrapped_body(), timeout=10)
        refused = requests.post(f"{push}guess-{TOKEN}", json={}, timeout=10)
        wrong_method = requests.get(push + TOKEN, timeout=10)
    statuses = (accepted.status_code, refused.status_code, wrong_method.status_code)
    assert statuses == (200, 401, 405)
    output = server.text()
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    decided = sorted(line["status"] for line in lines if line["message"] == "decided")
    assert decided == [200, 401]
    access = [line["httpRequest"] for line in lines if line["logger"] == "gunicorn.access"]
    assert [(entry["requestMethod"], entry["status"]) for entry in access] == [("GET", 405)]
    assert TOKEN not in output
