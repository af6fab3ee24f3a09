"""Each secret (database URL password, warm headers, SMTP password, hook secrets, push token) is
set on a real ``consumer serve``; it must not show in any response body, any line the server
logs (stdout and stderr, access log included), ``consumer settings`` or a settings error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.conftest import free_port, stop_process, wait_until
from tests.http.test_serve import clean_env

pytestmark = pytest.mark.slow
PUSH_TOKEN = "push-token-ZQ81x9vv3"
DB_PASSWORD = "db-password-Mk42p0"
SMTP_PASSWORD = "smtp-password-Lr77t1"
HOOK_SECRET = "hook-secret-Wx55q8aa"
WARM_HEADER = "warm-header-Yb93n2"
SECRETS = (PUSH_TOKEN, DB_PASSWORD, SMTP_PASSWORD, HOOK_SECRET, WARM_HEADER)
ENV = {
    "CONSUMER_PUSH_TOKEN": PUSH_TOKEN,
    "CONSUMER_SMTP_PASSWORD": SMTP_PASSWORD,
    "CONSUMER_DEPLOY_HOOK_SECRETS": HOOK_SECRET,
    "CONSUMER_WARM_HEADERS": json.dumps({"Authorization": f"Bearer {WARM_HEADER}"}),
    "CONSUMER_SMTP_HOST": "smtp.example.com",  # required outside local mode
}


def leaked(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


def test_consumer_settings_and_settings_errors_show_no_secret(tmp_path: Path) -> None:
    env = clean_env(tmp_path, **ENV)
    env["CONSUMER_DATABASE_URL"] = f"postgresql+psycopg://app:{DB_PASSWORD}@127.0.0.1:1/app"
    reference = subprocess.run([sys.executable, "-m", "consumer", "settings"], env=env,
                               capture_output=True, text=True, timeout=60)  # fmt: skip
    assert reference.returncode == 0 and not leaked(reference.stdout + reference.stderr)
    env["CONSUMER_WORKERS"] = "0"
    env["CONSUMER_DATABASE_URL"] = f"mysql://app:{DB_PASSWORD}@127.0.0.1:1/app"
    refused = subprocess.run([sys.executable, "-m", "consumer", "serve"], env=env,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert refused.returncode != 0 and "CONSUMER_WORKERS" in refused.stderr
    assert not leaked(refused.stdout + refused.stderr)


def test_a_serving_server_shows_no_secret(tmp_path: Path) -> None:
    """The database is unreachable on purpose (port 1): /readyz and /push report the outage."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = clean_env(tmp_path, **ENV, CONSUMER_LOG_LEVEL="DEBUG")
    env["CONSUMER_DATABASE_URL"] = f"postgresql+psycopg://app:{DB_PASSWORD}@127.0.0.1:1/app"
    log = tmp_path / "serve.log"
    with log.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "consumer", "serve", "--bind", f"127.0.0.1:{port}",
             "--workers", "1"],
            env=env, stdout=sink, stderr=sink,
        )  # fmt: skip
    bodies: list[str] = []
    try:
        wait_until(lambda: requests.get(f"{base}/healthz", timeout=2).ok)
        push = json.dumps({"message": {"messageId": "1", "publishTime": "2024-01-01T00:00:00Z"},
                           "subscription": "projects/p/subscriptions/s"})  # fmt: skip
        answers = [
            requests.get(f"{base}/readyz", timeout=30),
            requests.post(f"{base}/push?token={PUSH_TOKEN}", data=push, timeout=30),
            requests.post(f"{base}/push?token=wrong-{PUSH_TOKEN}", data=push, timeout=30),
            requests.post(f"{base}/hooks/deploy", data="{}", timeout=30, headers={
                "X-Consumer-Timestamp": "1", "X-Consumer-Signature": f"v1={HOOK_SECRET}"}),
            requests.get(f"{base}/nowhere?token={PUSH_TOKEN}", timeout=30),
        ]  # fmt: skip
        bodies = [answer.text for answer in answers]
        assert answers[0].status_code == 503 and answers[1].status_code == 503
        assert [a.status_code for a in answers[2:]] == [401, 401, 404]
    finally:
        stop_process(process, timeout=60)
    assert not leaked("\n".join(bodies)), bodies
    text = log.read_text()
    assert "GET /readyz" in text  # the access log was written
    assert not leaked(text), [line for line in text.splitlines() if leaked(line)]
