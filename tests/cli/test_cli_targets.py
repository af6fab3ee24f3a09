"""``consumer send`` and ``consumer deploy hook`` reach the server the settings describe, with
the secret the server reads, against a real gunicorn."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result

from consumer.cli.main import main
from consumer.config.settings import Settings
from tests.conftest import Server, free_port, settings_env

pytestmark = pytest.mark.slow
CLEAN = {k: None for k in os.environ if k.startswith(("CONSUMER_", "DEPLOY_HOOK_"))}
SECRET = "a-hook-secret-0123456789"


def invoke(*args: str, **env: str) -> Result:
    return CliRunner(env={**CLEAN, **env}).invoke(main, list(args))


@pytest.fixture
def server(sqlite_url: str, start_server: Callable[..., Server]) -> Server:
    settings = Settings(database_url=sqlite_url, local_mode=True)
    return start_server(settings_env(settings, CONSUMER_DEPLOY_HOOK_SECRETS=SECRET), workers=1)


def test_send_follows_the_bind_and_consumer_send_to(server: Server) -> None:
    bound = invoke("send", "tick", "cleanup", CONSUMER_BIND=f"0.0.0.0:{server.port}")
    assert bound.exit_code == 0 and bound.output.startswith("200 "), bound.output
    elsewhere = f"127.0.0.1:{free_port()}"
    sent_to = invoke(
        "send",
        "deploy",
        "web",
        "v1",
        CONSUMER_BIND=elsewhere,
        CONSUMER_SEND_TO=server.url + "/push",
    )
    assert sent_to.exit_code == 0 and sent_to.output.startswith("200 "), sent_to.output
    missed = invoke("send", "tick", "cleanup", CONSUMER_BIND=elsewhere)
    assert missed.exit_code == 1 and f"cannot reach http://{elsewhere}/push" in missed.output


def test_deploy_hook_signs_with_the_servers_variable(server: Server) -> None:
    bind = f"127.0.0.1:{server.port}"
    hooked = invoke("deploy", "hook", "web", "v2", CONSUMER_BIND=bind,
                    CONSUMER_DEPLOY_HOOK_SECRETS=f"{SECRET},an-older-secret-0123456")  # fmt: skip
    assert hooked.exit_code == 0 and hooked.output.startswith("200 "), hooked.output
    fallback = invoke("deploy", "hook", "web", "v3", CONSUMER_BIND=bind, DEPLOY_HOOK_SECRET=SECRET)
    assert fallback.exit_code == 0 and fallback.output.startswith("200 "), fallback.output
    wrong = invoke("deploy", "hook", "web", "v4", CONSUMER_BIND=bind,
                   DEPLOY_HOOK_SECRET="a-wrong-secret-0123456789")  # fmt: skip
    assert wrong.exit_code == 1 and wrong.output.startswith("401 "), wrong.output
    unset = invoke("deploy", "hook", "web", "v5", CONSUMER_BIND=bind)
    assert unset.exit_code == 2 and "CONSUMER_DEPLOY_HOOK_SECRETS" in unset.output
