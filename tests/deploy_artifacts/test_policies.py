"""Policies over the rendered overlays: each overlay complies, and each policy catches the mistake
it exists for (a broken copy of the prod overlay must be reported)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.deploy_artifacts import policies
from tests.deploy_artifacts.artifacts import Doc, config_env, find, one, pod_spec
from tests.deploy_artifacts.conftest import rendered_overlay


@pytest.mark.parametrize("policy", policies.ALL, ids=lambda p: p.__name__)
def test_overlay_complies(docs: list[Doc], policy: Callable[[list[Doc]], list[str]]) -> None:
    assert policy(docs) == []


def _web(docs: list[Doc]) -> Doc:
    return one(docs, "Deployment", "consumer")


def _container(docs: list[Doc]) -> Doc:
    container: Doc = pod_spec(_web(docs))["containers"][0]
    return container


def _configmap(docs: list[Doc]) -> Doc:
    return next(m for m in find(docs, "ConfigMap") if m["metadata"]["name"].startswith("consumer"))


def _no_liveness(docs: list[Doc]) -> None:
    del _container(docs)["livenessProbe"]


def _probe_on_unknown_port(docs: list[Doc]) -> None:
    _container(docs)["readinessProbe"]["httpGet"]["port"] = "metrics"


def _no_limits(docs: list[Doc]) -> None:
    del pod_spec(one(docs, "Job"))["containers"][0]["resources"]["limits"]


def _writable_root(docs: list[Doc]) -> None:
    _container(docs)["securityContext"]["readOnlyRootFilesystem"] = False


def _root_user(docs: list[Doc]) -> None:
    _container(docs)["securityContext"]["runAsUser"] = 0


def _capabilities_kept(docs: list[Doc]) -> None:
    del _container(docs)["securityContext"]["capabilities"]


def _one_replica(docs: list[Doc]) -> None:
    _web(docs)["spec"]["replicas"] = 1


def _hpa_down_to_one(docs: list[Doc]) -> None:
    one(docs, "HorizontalPodAutoscaler")["spec"]["minReplicas"] = 1


def _single_zone(docs: list[Doc]) -> None:
    spread = pod_spec(_web(docs))["topologySpreadConstraints"]
    spread[:] = [c for c in spread if c["topologyKey"] != "topology.kubernetes.io/zone"]


def _short_grace(docs: list[Doc]) -> None:
    pod_spec(_web(docs))["terminationGracePeriodSeconds"] = 70


def _longer_ack_deadline(docs: list[Doc]) -> None:
    _configmap(docs)["data"]["CONSUMER_ACK_DEADLINE_SECONDS"] = "120"


def _migrate_in_init_container(docs: list[Doc]) -> None:
    init = {**_container(docs), "name": "migrate", "command": ["consumer", "db", "upgrade"]}
    pod_spec(_web(docs))["initContainers"] = [init]


def _no_migration_job(docs: list[Doc]) -> None:
    docs.remove(one(docs, "Job"))


def _local_mode(docs: list[Doc]) -> None:
    _configmap(docs)["data"]["CONSUMER_LOCAL_MODE"] = "true"


def _committed_secret(docs: list[Doc]) -> None:
    docs.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "consumer-database"}})


def _url_in_configmap(docs: list[Doc]) -> None:
    _configmap(docs)["data"]["CONSUMER_DATABASE_URL"] = "postgresql+psycopg://u:p@db/consumer"


def _latest_image(docs: list[Doc]) -> None:
    _container(docs)["image"] = "europe-west1-docker.pkg.dev/p/consumer/consumer:latest"


def _default_service_account(docs: list[Doc]) -> None:
    del pod_spec(_web(docs))["serviceAccountName"]


BREAKAGES = [
    (_no_liveness, "no livenessProbe"),
    (_probe_on_unknown_port, "readinessProbe port is not declared"),
    (_no_limits, "no limits"),
    (_writable_root, "readOnlyRootFilesystem is not hardened"),
    (_root_user, "runAsUser is not hardened"),
    (_capabilities_kept, "capabilities is not hardened"),
    (_one_replica, "replicas below 2"),
    (_hpa_down_to_one, "minReplicas below 2"),
    (_single_zone, "not spread over topology.kubernetes.io/zone"),
    (_short_grace, "terminationGracePeriodSeconds 70"),
    (_longer_ack_deadline, "ack deadline 120"),
    (_migrate_in_init_container, "runs the migration in the pod start-up"),
    (_no_migration_job, "expected one migration Job, found 0"),
    (_local_mode, "CONSUMER_LOCAL_MODE is on"),
    (_committed_secret, "a committed Secret"),
    (_url_in_configmap, "CONSUMER_DATABASE_URL is in the ConfigMap"),
    (_latest_image, "is not pinned"),
    (_default_service_account, "not annotated for Workload Identity"),
]


@pytest.mark.parametrize(
    ("breakage", "reported"), BREAKAGES, ids=lambda b: getattr(b, "__name__", "")
)
def test_policy_reports_the_breakage(breakage: Callable[[list[Doc]], None], reported: str) -> None:
    docs = rendered_overlay("prod")
    assert not any(reported in problem for problem in policies.violations(docs))
    breakage(docs)
    problems = policies.violations(docs)
    assert any(reported in problem for problem in problems), problems


def test_ack_deadline_is_read_from_the_configmap() -> None:
    docs = rendered_overlay("prod")
    assert policies.ack_deadline(docs) == int(config_env(docs)["CONSUMER_ACK_DEADLINE_SECONDS"])
