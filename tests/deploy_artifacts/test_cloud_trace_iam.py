"""Terraform lets the pods write to Cloud Trace when asked (``cloud_trace = true``): the API is
enabled and the workload's service account, and no other, is granted ``roles/cloudtrace.agent``;
by default the grant is not made."""

from __future__ import annotations

from pathlib import Path

import hcl2

from tests.deploy_artifacts.artifacts import TERRAFORM
from tests.deploy_artifacts.terraform import Module, unquote

DOCS = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


def test_the_trace_agent_role_goes_to_the_workload_only_when_asked() -> None:
    module = Module.load(TERRAFORM)
    grant = module.resource("google_project_iam_member", "workload_trace_agent")
    assert grant["role"] == "roles/cloudtrace.agent"
    assert grant["member"] == "serviceAccount:${google_service_account.workload.email}"
    assert grant["count"] == "${var.cloud_trace ? 1 : 0}"
    assert module.default("cloud_trace") is False
    assert "`cloud_trace = true`" in DOCS.read_text()


def test_the_cloud_trace_api_is_enabled() -> None:
    with (TERRAFORM / "project.tf").open() as handle:
        parsed = unquote(hcl2.load(handle))
    [apis] = [block["google_project_service"]["apis"] for block in parsed["resource"]]
    assert "cloudtrace.googleapis.com" in apis["for_each"]
