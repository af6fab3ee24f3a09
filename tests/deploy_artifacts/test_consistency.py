"""Terraform, the manifests, the image and the service's defaults agree: the timing chain, the push
identity and audience, Workload Identity, health checks, storage notifications and dead-lettering
(the scheduler's cadence: ``test_scheduler_consistency``)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from consumer.http import routes
from tests.deploy_artifacts.artifacts import Doc, config_env, one, pod_spec
from tests.deploy_artifacts.terraform import Module, evaluate
from tests.deploy_artifacts.timing import Chain, gather, problems, service_settings


@pytest.fixture
def chain(docs: list[Doc], module: Module, values: dict[str, Any]) -> Chain:
    return gather(docs, module, values)


def test_timing_chain_holds(chain: Chain) -> None:
    assert problems(chain) == []


@pytest.mark.parametrize(
    ("change", "reported"),
    [
        ({"subscription_acks": frozenset({120})}, "subscription ack deadline"),
        ({"terraform_default_ack": 30}, "Terraform and service defaults differ"),
        ({"gunicorn_timeout": 30}, "gunicorn --timeout"),
        ({"gunicorn_graceful": 30}, "gunicorn --graceful-timeout"),
        ({"grace": 75}, "grace period"),
        ({"liveness_tolerance": 30}, "liveness"),
        ({"lb_timeout": 30}, "load balancer timeout"),
        ({"lb_draining": 120}, "load balancer draining"),
        ({"max_delivery_attempts": 5}, "dead-lettered before the inbox"),
        ({"handler_budget": 0.0}, "handler budget"),
    ],
)
def test_timing_chain_reports_a_broken_link(
    chain: Chain, change: dict[str, Any], reported: str
) -> None:
    assert any(reported in problem for problem in problems(replace(chain, **change)))


def test_gunicorn_follows_a_changed_ack_deadline(docs: list[Doc], module: Module) -> None:
    """The image's gunicorn reads the deadline from the ConfigMap: no second place to edit."""
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    configmap["data"]["CONSUMER_ACK_DEADLINE_SECONDS"] = "120"
    changed = gather(docs, module, module.values())
    assert (changed.gunicorn_timeout, changed.gunicorn_graceful) == (120, 120)
    assert "subscription ack deadline != CONSUMER_ACK_DEADLINE_SECONDS" in problems(changed)


def test_push_audience_and_host_agree(docs: list[Doc], values: dict[str, Any]) -> None:
    audience = service_settings(docs).auth.push_audience
    assert audience == (values["push_audience"] or values["push_endpoint"])
    url = urlparse(audience)
    ingress_rule = one(docs, "Ingress")["spec"]["rules"][0]
    assert ingress_rule["host"] == url.hostname
    assert any(url.path.startswith(path["path"]) for path in ingress_rule["http"]["paths"])
    assert one(docs, "ManagedCertificate")["spec"]["domains"] == [url.hostname]


def test_push_service_account_is_the_one_terraform_signs_with(
    docs: list[Doc], module: Module, values: dict[str, Any]
) -> None:
    account = evaluate(module.resource("google_service_account", "push")["account_id"], values)
    email = f"{account}@{values['project_id']}.iam.gserviceaccount.com"
    assert service_settings(docs).auth.push_service_accounts == (email,)
    oidc = module.resource("google_pubsub_subscription", "push")["push_config"][0]["oidc_token"][0]
    assert oidc["service_account_email"] == "${google_service_account.push.email}"


def test_workload_identity_binds_the_pods_service_account(
    docs: list[Doc], module: Module, values: dict[str, Any]
) -> None:
    web = one(docs, "Deployment", "consumer")
    account = one(docs, "ServiceAccount", pod_spec(web)["serviceAccountName"])
    namespace = web["metadata"]["namespace"]
    workload = evaluate(module.resource("google_service_account", "workload")["account_id"], values)
    expected = f"{workload}@{values['project_id']}.iam.gserviceaccount.com"
    assert account["metadata"]["annotations"]["iam.gke.io/gcp-service-account"] == expected
    binding = module.resource("google_service_account_iam_member", "workload_identity")
    member = evaluate(binding["member"], values)
    name = account["metadata"]["name"]
    assert member == f"serviceAccount:{values['project_id']}.svc.id.goog[{namespace}/{name}]"


def test_load_balancer_health_check_is_the_readiness_endpoint(docs: list[Doc]) -> None:
    container = pod_spec(one(docs, "Deployment", "consumer"))["containers"][0]
    port = container["ports"][0]
    health = one(docs, "BackendConfig")["spec"]["healthCheck"]
    assert health["requestPath"] == container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert health["port"] == port["containerPort"]
    assert service_settings(docs).server.bind.rsplit(":", 1)[1] == str(port["containerPort"])
    service = one(docs, "Service", "consumer")
    assert service["spec"]["ports"][0]["targetPort"] == port["name"]
    annotation = json.loads(service["metadata"]["annotations"]["cloud.google.com/backend-config"])
    assert annotation["default"] == one(docs, "BackendConfig")["metadata"]["name"]


def test_storage_notification_matches_what_the_service_parses(module: Module) -> None:
    notification = module.resource("google_storage_notification", "uploads")
    assert notification["payload_format"] == "JSON_API_V1"
    assert notification["event_types"] == ["OBJECT_FINALIZE"]
    assert notification["topic"] == '${google_pubsub_topic.events["storage"].id}'


def test_dead_lettering_has_the_iam_it_needs(module: Module) -> None:
    push = module.resource("google_pubsub_subscription", "push")
    policy = push["dead_letter_policy"][0]
    assert policy["dead_letter_topic"] == "${google_pubsub_topic.dead_letter.id}"
    publisher = module.resource("google_pubsub_topic_iam_member", "dead_letter_publisher")
    subscriber = module.resource("google_pubsub_subscription_iam_member", "dead_letter_subscriber")
    assert publisher["topic"] == policy["dead_letter_topic"]
    assert publisher["member"] == subscriber["member"] == "${local.pubsub_service_agent}"
    assert (publisher["role"], subscriber["role"]) == (
        "roles/pubsub.publisher",
        "roles/pubsub.subscriber",
    )
    assert subscriber["for_each"] == "${google_pubsub_subscription.push}"


def test_configmap_holds_only_settings_the_service_knows(docs: list[Doc]) -> None:
    """Settings.from_env rejects unknown CONSUMER_* names; a typo would crash every pod."""
    env = config_env(docs)
    assert all(key.startswith("CONSUMER_") for key in env)
    service_settings(docs).validate()


def test_ingress_exposes_exactly_the_services_post_routes(docs: list[Doc], tmp_path: Path) -> None:
    """Every entry a trigger calls is reachable; health, readiness and metrics stay internal."""
    rows = [row.path for row in routes.TABLE if "POST" in row.methods]
    posts = {row.split("/{", 1)[0] for row in rows}  # /ticks/{task}: the Prefix /ticks
    rule = one(docs, "Ingress")["spec"]["rules"][0]
    assert {path["path"] for path in rule["http"]["paths"]} == posts
