"""Policies over rendered manifests. Each returns the list of violations (empty = compliant), so a
test can prove a policy both accepts our overlays and rejects a deliberately broken copy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from consumer.config.settings import Settings
from tests.deploy_artifacts.artifacts import (
    SERVING_KINDS,
    Doc,
    config_env,
    containers,
    find,
    pod_spec,
    prestop_seconds,
    workloads,
)

PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
MIGRATION_WORDS = ("db upgrade", "alembic")


def _name(doc: Doc, container: Doc | None = None) -> str:
    where = f"{doc['kind']}/{doc['metadata']['name']}"
    return f"{where}[{container['name']}]" if container else where


def probes(docs: list[Doc]) -> list[str]:
    """Every serving container has startup, readiness and liveness probes on a declared port."""
    problems = []
    for doc in workloads(docs, SERVING_KINDS):
        for container in containers(doc, init=False):
            ports = {p.get("name") for p in container.get("ports", [])}
            ports |= {p["containerPort"] for p in container.get("ports", [])}
            for probe in PROBES:
                spec = container.get(probe)
                if spec is None:
                    problems.append(f"{_name(doc, container)}: no {probe}")
                elif "httpGet" in spec and spec["httpGet"]["port"] not in ports:
                    problems.append(f"{_name(doc, container)}: {probe} port is not declared")
    return problems


def resources(docs: list[Doc]) -> list[str]:
    """Every container (init and Job ones too) requests and limits CPU and memory."""
    problems = []
    for doc in workloads(docs):
        for container in containers(doc):
            spec = container.get("resources", {})
            for bound in ("requests", "limits"):
                missing = {"cpu", "memory"} - set(spec.get(bound, {}))
                if missing:
                    problems.append(f"{_name(doc, container)}: no {bound} for {sorted(missing)}")
    return problems


def _effective(doc: Doc, container: Doc, key: str) -> Any:
    """A security setting as Kubernetes applies it: the container's, else the pod's."""
    own = container.get("securityContext", {})
    return own[key] if key in own else pod_spec(doc).get("securityContext", {}).get(key)


def hardening(docs: list[Doc]) -> list[str]:
    """Non-root, read-only root filesystem, no privilege escalation, no capabilities, seccomp."""
    expected: dict[str, Callable[[Any], bool]] = {
        "runAsNonRoot": lambda v: v is True,
        "runAsUser": lambda v: v is None or v != 0,
        "readOnlyRootFilesystem": lambda v: v is True,
        "allowPrivilegeEscalation": lambda v: v is False,
        "capabilities": lambda v: bool(v) and "ALL" in v.get("drop", []),
        "seccompProfile": lambda v: bool(v) and v.get("type") == "RuntimeDefault",
    }
    problems = []
    for doc in workloads(docs):
        for container in containers(doc):
            for key, ok in expected.items():
                if not ok(_effective(doc, container, key)):
                    problems.append(f"{_name(doc, container)}: {key} is not hardened")
    return problems


def availability(docs: list[Doc]) -> list[str]:
    """At least two replicas (and autoscaling minimum), a disruption budget, spread over nodes
    and zones."""
    problems = []
    for doc in workloads(docs, SERVING_KINDS):
        if doc["spec"].get("replicas", 1) < 2:
            problems.append(f"{_name(doc)}: replicas below 2")
        keys = {c["topologyKey"] for c in pod_spec(doc).get("topologySpreadConstraints", [])}
        for key in ("kubernetes.io/hostname", "topology.kubernetes.io/zone"):
            if key not in keys:
                problems.append(f"{_name(doc)}: not spread over {key}")
    for hpa in find(docs, "HorizontalPodAutoscaler"):
        if hpa["spec"].get("minReplicas", 1) < 2:
            problems.append(f"{_name(hpa)}: minReplicas below 2")
    if not find(docs, "PodDisruptionBudget"):
        problems.append("no PodDisruptionBudget")
    return problems


def ack_deadline(docs: list[Doc]) -> int:
    env = config_env(docs)
    return int(env.get("CONSUMER_ACK_DEADLINE_SECONDS", Settings().inbox.ack_deadline_seconds))


def grace_period(docs: list[Doc]) -> list[str]:
    """A pod is given longer than the preStop pause plus a full ack deadline to finish."""
    needed = ack_deadline(docs)
    problems = []
    for doc in workloads(docs, SERVING_KINDS):
        grace = pod_spec(doc).get("terminationGracePeriodSeconds", 30)
        for container in containers(doc, init=False):
            if grace <= prestop_seconds(container) + needed:
                problems.append(
                    f"{_name(doc)}: terminationGracePeriodSeconds {grace} <= preStop "
                    f"{prestop_seconds(container)} + ack deadline {needed}"
                )
    return problems


def _runs_migration(container: Doc) -> bool:
    line = " ".join(map(str, container.get("command", []) + container.get("args", [])))
    return any(word in line for word in MIGRATION_WORDS)


def migration(docs: list[Doc]) -> list[str]:
    """Migrations run in exactly one single-pod Job, never in a serving pod's start-up (and local
    mode, whose ``consumer serve`` migrates and skips authentication, is off)."""
    problems = [
        f"{_name(doc, container)}: runs the migration in the pod start-up"
        for doc in workloads(docs, SERVING_KINDS)
        for container in containers(doc)
        if _runs_migration(container)
    ]
    jobs = [
        job
        for job in find(docs, "Job")
        if any(_runs_migration(container) for container in containers(job))
    ]
    if len(jobs) != 1:
        problems.append(f"expected one migration Job, found {len(jobs)}")
    problems += [
        f"{_name(job)}: parallelism above 1"
        for job in jobs
        if job["spec"].get("parallelism", 1) != 1
    ]
    if config_env(docs).get("CONSUMER_LOCAL_MODE", "false").lower() in {"1", "true", "yes", "on"}:
        problems.append("CONSUMER_LOCAL_MODE is on")
    return problems


def secrets(docs: list[Doc]) -> list[str]:
    """No Secret is committed; the database URL comes from a Secret reference."""
    problems = [f"{_name(doc)}: a committed Secret" for doc in find(docs, "Secret")]
    if "CONSUMER_DATABASE_URL" in config_env(docs):
        problems.append("CONSUMER_DATABASE_URL is in the ConfigMap")
    for doc in workloads(docs):
        for container in containers(doc, init=False):
            env = {item["name"]: item for item in container.get("env", [])}
            source = env.get("CONSUMER_DATABASE_URL", {}).get("valueFrom", {})
            if "secretKeyRef" not in source:
                problems.append(f"{_name(doc, container)}: database URL not from a Secret")
    return problems


def _pinned(image: str) -> bool:
    if "@sha256:" in image:
        return True
    repository, _, tag = image.rpartition(":")
    return "/" in repository and tag not in ("", "latest") and "/" not in tag


def images(docs: list[Doc]) -> list[str]:
    """Images come from a registry with an explicit, non-floating tag or a digest."""
    return [
        f"{_name(doc, container)}: image {container['image']!r} is not pinned"
        for doc in workloads(docs)
        for container in containers(doc)
        if not _pinned(container["image"])
    ]


def identity(docs: list[Doc]) -> list[str]:
    """Pods run as a Kubernetes service account bound to a Google one (Workload Identity)."""
    annotated = {
        sa["metadata"]["name"]
        for sa in find(docs, "ServiceAccount")
        if "iam.gke.io/gcp-service-account" in sa["metadata"].get("annotations", {})
    }
    return [
        f"{_name(doc)}: service account is not annotated for Workload Identity"
        for doc in workloads(docs)
        if pod_spec(doc).get("serviceAccountName") not in annotated
    ]


ALL = (
    probes,
    resources,
    hardening,
    availability,
    grace_period,
    migration,
    secrets,
    images,
    identity,
)


def violations(docs: list[Doc]) -> list[str]:
    return [problem for policy in ALL for problem in policy(docs)]
