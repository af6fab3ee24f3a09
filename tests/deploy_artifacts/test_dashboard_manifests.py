"""The dashboard's manifests: its own Deployment and ClusterIP Service, never an Ingress backend,
no other pod admitted, authentication required. Each check also rejects a broken copy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from consumer.config.settings import Settings
from consumer.dashboard.access import Access
from tests.deploy_artifacts.artifacts import Doc, config_env, find, one, pod_spec
from tests.deploy_artifacts.conftest import rendered_overlay

NAME = "consumer-dashboard"


def _labels(docs: list[Doc]) -> dict[str, str]:
    labels: dict[str, str] = one(docs, "Deployment", NAME)["spec"]["template"]["metadata"]["labels"]
    return labels


def _selects(policy: Doc, labels: dict[str, str]) -> bool:
    """Whether a NetworkPolicy's podSelector (matchLabels and matchExpressions) picks ``labels``."""
    selector = policy["spec"]["podSelector"]
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for rule in selector.get("matchExpressions", []):
        value, values = labels.get(rule["key"]), rule.get("values", [])
        matched = {
            "In": value in values, "NotIn": value not in values,
            "Exists": value is not None, "DoesNotExist": value is None,
        }[rule["operator"]]  # fmt: skip
        if not matched:
            return False
    return True


def isolation(docs: list[Doc]) -> list[str]:
    """Some policy selects the dashboard's pods for Ingress, and none admits anything."""
    labels = _labels(docs)
    policies = [p for p in find(docs, "NetworkPolicy") if _selects(p, labels)]
    problems = [
        f"NetworkPolicy/{p['metadata']['name']} admits traffic to the dashboard"
        for p in policies
        if p["spec"].get("ingress")
    ]
    if not any("Ingress" in p["spec"].get("policyTypes", []) for p in policies):
        problems.append("no NetworkPolicy isolates the dashboard's pods")
    return problems


def exposure(docs: list[Doc]) -> list[str]:
    """Only a ClusterIP Service reaches the dashboard, and no Ingress routes to it."""
    labels = _labels(docs)
    problems = []
    for service in find(docs, "Service"):
        selector = service["spec"].get("selector", {})
        if all(labels.get(k) == v for k, v in selector.items()):
            if service["spec"].get("type", "ClusterIP") != "ClusterIP":
                problems.append(f"Service/{service['metadata']['name']} is not ClusterIP")
            if any(_routes_to(ingress, service) for ingress in find(docs, "Ingress")):
                problems.append(f"an Ingress routes to Service/{service['metadata']['name']}")
    return problems


def _routes_to(ingress: Doc, service: Doc) -> bool:
    backends: list[Any] = [ingress["spec"].get("defaultBackend", {})]
    for rule in ingress["spec"].get("rules", []):
        backends += [path["backend"] for path in rule.get("http", {}).get("paths", [])]
    names = {b.get("service", {}).get("name") for b in backends}
    return service["metadata"]["name"] in names


def _container(docs: list[Doc]) -> Doc:
    container: Doc = pod_spec(one(docs, "Deployment", NAME))["containers"][0]
    return container


def test_the_dashboard_pods_admit_no_one(docs: list[Doc]) -> None:
    assert isolation(docs) == []


def test_the_dashboard_is_reached_by_port_forward_only(docs: list[Doc]) -> None:
    assert exposure(docs) == []


def test_the_dashboard_requires_its_token_and_serves_its_own_app(docs: list[Doc]) -> None:
    container = _container(docs)
    env = {item["name"]: item for item in container["env"]}
    token = env["CONSUMER_DASHBOARD_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert token == {"name": NAME, "key": "token"}  # no optional: the pod waits for the Secret
    assert "consumer.dashboard.wsgi:app()" in container["args"]
    port = container["ports"][0]["containerPort"]
    assert f"0.0.0.0:{port}" in container["args"] and port != 8080
    values = {**config_env(docs), "CONSUMER_DASHBOARD_TOKEN": "t" * 32}
    values["CONSUMER_DASHBOARD_BIND"] = env["CONSUMER_DASHBOARD_BIND"]["value"]
    settings = Settings.from_env(values, serves_push=False)
    assert not settings.local_mode and settings.dashboard.bind != settings.server.bind
    Access.from_settings(settings)


def _admit_the_web_pods(docs: list[Doc]) -> None:
    policy = one(docs, "NetworkPolicy", NAME)
    policy["spec"]["ingress"] = [{"from": [{"podSelector": {}}]}]


def _web_policy_covers_the_dashboard(docs: list[Doc]) -> None:
    del one(docs, "NetworkPolicy", "consumer")["spec"]["podSelector"]["matchExpressions"]


def _no_dashboard_policy(docs: list[Doc]) -> None:
    docs.remove(one(docs, "NetworkPolicy", NAME))


def _load_balanced(docs: list[Doc]) -> None:
    one(docs, "Service", NAME)["spec"]["type"] = "LoadBalancer"


def _behind_the_ingress(docs: list[Doc]) -> None:
    rule = one(docs, "Ingress")["spec"]["rules"][0]
    backend = {"service": {"name": NAME, "port": {"number": 80}}}
    rule["http"]["paths"].append({"path": "/ops", "pathType": "Prefix", "backend": backend})


@pytest.mark.parametrize(
    ("check", "breakage"),
    [
        (isolation, _admit_the_web_pods),
        (isolation, _web_policy_covers_the_dashboard),
        (isolation, _no_dashboard_policy),
        (exposure, _load_balanced),
        (exposure, _behind_the_ingress),
    ],
    ids=lambda f: f.__name__,
)
def test_each_check_catches_its_mistake(
    check: Callable[[list[Doc]], list[str]], breakage: Callable[[list[Doc]], None]
) -> None:
    docs = rendered_overlay("prod")
    breakage(docs)
    assert check(docs) != []
