"""The jobs topic and the wake-ups topic: Terraform pushes both to the service with the same
dead-lettering as every trigger, the workload may publish wake-ups, and each overlay wakes on
the topic Terraform makes for its project."""

from __future__ import annotations

from typing import Any

import hcl2
import pytest

from tests.deploy_artifacts.artifacts import TERRAFORM, Doc, config_env
from tests.deploy_artifacts.terraform import Module, evaluate, unquote


@pytest.fixture(scope="module")
def module() -> Module:
    return Module.load(TERRAFORM)


def topics(values: dict[str, Any]) -> dict[str, str]:
    """``local.topics`` of pubsub.tf, evaluated."""
    with (TERRAFORM / "pubsub.tf").open() as handle:
        parsed = unquote(hcl2.load(handle))
    [block] = [block for block in parsed["locals"] if "topics" in block]
    return {kind: evaluate(name, values) for kind, name in block["topics"].items()}


def test_jobs_and_wakeups_are_pushed_to_the_service_with_dead_lettering(module: Module) -> None:
    assert {"jobs", "wakeups"} <= set(topics(module.values()))
    push = module.resource("google_pubsub_subscription", "push")
    assert push["for_each"] == "${local.topics}"
    assert push["push_config"][0]["push_endpoint"] == "${var.push_endpoint}"
    assert push["dead_letter_policy"][0]["dead_letter_topic"] == (
        "${google_pubsub_topic.dead_letter.id}"
    )


def test_the_workload_publishes_wake_ups_and_producers_publish_jobs(module: Module) -> None:
    wakeups = module.resource("google_pubsub_topic_iam_member", "workload_wakeups_publisher")
    assert wakeups["topic"] == '${google_pubsub_topic.events["wakeups"].id}'
    assert wakeups["role"] == "roles/pubsub.publisher"
    assert wakeups["member"] == "serviceAccount:${google_service_account.workload.email}"
    jobs = module.resource("google_pubsub_topic_iam_member", "job_publishers")
    assert jobs["topic"] == '${google_pubsub_topic.events["jobs"].id}'
    assert module.default("job_publishers") == []


def test_each_overlay_wakes_on_its_projects_wakeups_topic(
    docs: list[Doc], module: Module, overlay: str
) -> None:
    values = module.values(TERRAFORM / f"{overlay}.example.tfvars")
    expected = f"projects/{values['project_id']}/topics/{topics(values)['wakeups']}"
    assert config_env(docs)["CONSUMER_WAKE_TOPIC"] == expected
