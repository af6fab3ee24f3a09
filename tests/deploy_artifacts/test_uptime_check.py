"""The external health check in Terraform agrees with what it probes: the uptime check asks
the host the Ingress serves, on a path the Ingress routes, for the status the app really
answers there (asked of the app itself); the alert policy watches that very check."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

import hcl2
import pytest

from consumer.config.settings import Settings
from consumer.http.app import create_app
from consumer.service import Service
from tests.deploy_artifacts.artifacts import TERRAFORM, Doc, one
from tests.deploy_artifacts.terraform import Module, evaluate, unquote

CHECK = ("google_monitoring_uptime_check_config", "push")
POLICY = ("google_monitoring_alert_policy", "push_uptime")


@pytest.fixture(scope="module")
def module() -> Module:
    return Module.load(TERRAFORM)


def public_host(values: dict[str, Any]) -> str:
    """``local.public_host`` evaluated: the regex the module applies to the push endpoint."""
    with (TERRAFORM / "monitoring.tf").open() as handle:
        local = unquote(hcl2.load(handle))["locals"][0]["public_host"]
    pattern = re.fullmatch(r'\$\{regex\("(.+)", var\.push_endpoint\)\[0\]\}', local)
    assert pattern, f"say how {local!r} evaluates"
    match = re.match(pattern.group(1).replace("\\\\", "\\"), values["push_endpoint"])
    assert match, values["push_endpoint"]
    return match.group(1)


def test_the_uptime_check_probes_the_ingress_host_on_a_routed_path(
    docs: list[Doc], module: Module, overlay: str
) -> None:
    values = module.values(TERRAFORM / f"{overlay}.example.tfvars")
    check = module.resource(*CHECK)
    labels = check["monitored_resource"][0]["labels"]
    assert labels["host"] == "${local.public_host}"
    rule = one(docs, "Ingress")["spec"]["rules"][0]
    assert public_host(values) == rule["host"]
    assert evaluate(labels["project_id"], values) == values["project_id"]
    http = check["http_check"][0]
    routed = [path["path"] for path in rule["http"]["paths"]]
    assert http["path"] in routed and http["use_ssl"] and http["validate_ssl"]


def test_the_accepted_status_is_what_the_app_answers_there(sqlite_url: str, module: Module) -> None:
    """Asked of an app with push authentication on, as in a cluster: no credential needed."""
    http = module.resource(*CHECK)["http_check"][0]
    settings = Settings.of(database_url=sqlite_url, push_token="uptime-test-token-0123456789")
    client = create_app(Service.of(settings)).test_client()
    answer = client.open(http["path"], method=http["request_method"])
    accepted = [code["status_value"] for code in http["accepted_response_status_codes"]]
    assert accepted == [answer.status_code]


def test_the_alert_policy_watches_the_uptime_check(module: Module) -> None:
    policy = module.resource(*POLICY)
    condition = policy["conditions"][0]["condition_threshold"][0]
    check_id = "${google_monitoring_uptime_check_config.push.uptime_check_id}"
    assert f'metric.label.check_id=\\"{check_id}\\"' in condition["filter"]
    assert "uptime_check/check_passed" in condition["filter"]
    aggregation = condition["aggregations"][0]
    assert aggregation["cross_series_reducer"] == "REDUCE_COUNT_FALSE"
    assert policy["notification_channels"] == "${var.alert_notification_channels}"


def test_the_module_is_formatted() -> None:
    terraform = shutil.which("terraform")
    if terraform is None:
        pytest.skip("terraform is not installed")
    result = subprocess.run(
        [terraform, "fmt", "-check", "-diff", "-no-color", str(TERRAFORM)],
        env={"TF_CLI_CONFIG_FILE": "/dev/null", "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
