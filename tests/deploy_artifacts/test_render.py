"""Every overlay renders with ``kubectl kustomize`` and passes ``kubernetes-validate --strict``
for each Kubernetes minor version GKE currently supports."""

from __future__ import annotations

import jsonschema
import pytest
from kubernetes_validate import utils as kv

from tests.deploy_artifacts.artifacts import Doc, find
from tests.deploy_artifacts.conftest import rendered_overlay
from tests.deploy_artifacts.crd_schemas import CRD_SCHEMAS

# GKE's current versions table (release notes, November 2026): the Extended channel still
# offers 1.31, the Rapid channel already 1.37. kubernetes-validate 1.37 ships all of them.
GKE_VERSIONS = ("1.31", "1.32", "1.33", "1.34", "1.35", "1.36", "1.37")
EXPECTED_KINDS = {
    "Namespace", "ServiceAccount", "ConfigMap", "Service", "Deployment", "PodDisruptionBudget",
    "HorizontalPodAutoscaler", "Job", "BackendConfig", "ManagedCertificate", "Ingress",
    "NetworkPolicy", "PodMonitoring", "Rules",
}  # fmt: skip
PLACEHOLDERS = ("PROJECT_ID", "REGION-docker", "consumer.example.com")


def validate(doc: Doc, version: str) -> None:
    """Strict schema validation; the GKE custom resources against our own strict schemas."""
    crd_schema = CRD_SCHEMAS.get((doc["apiVersion"], doc["kind"]))
    if crd_schema is not None:
        jsonschema.validate(doc, crd_schema)
        return
    kv.validate(doc, version, strict=True)


def test_every_overlay_renders_the_whole_service(docs: list[Doc]) -> None:
    assert {doc["kind"] for doc in docs} == EXPECTED_KINDS
    assert (
        len({doc["metadata"].get("namespace") for doc in docs if doc["kind"] != "Namespace"}) == 1
    )


@pytest.mark.parametrize("version", GKE_VERSIONS)
def test_overlay_is_valid_for_every_gke_version(docs: list[Doc], version: str) -> None:
    for doc in docs:
        try:
            validate(doc, version)
        except (kv.ValidationError, jsonschema.ValidationError) as error:
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} on {version}: {error.message}")


def test_installed_kubernetes_validate_ships_every_gke_version() -> None:
    """Otherwise validate() silently falls back to an older schema."""
    shipped = {kv.major_minor(version) for version in kv.all_versions()}
    assert set(GKE_VERSIONS) <= shipped


def test_only_the_known_gke_custom_resources_lack_a_bundled_schema(docs: list[Doc]) -> None:
    unknown = []
    for doc in docs:
        try:
            kv.validate(doc, GKE_VERSIONS[-1], strict=True)
        except kv.SchemaNotFoundError:
            unknown.append((doc["apiVersion"], doc["kind"]))
    assert set(unknown) == set(CRD_SCHEMAS)


@pytest.mark.parametrize(
    ("kind", "path", "typo"),
    [
        ("Deployment", ("spec", "template", "spec"), "terminationGracePeriod"),
        ("BackendConfig", ("spec",), "timeoutSeconds"),
        ("ManagedCertificate", ("spec",), "domain"),
        ("PodMonitoring", ("spec", "endpoints", 0), "scrapeInterval"),
        ("Rules", ("spec", "groups", 0, "rules", 0), "severity"),
    ],
)
def test_strict_validation_rejects_a_misspelt_field(
    kind: str, path: tuple[str | int, ...], typo: str
) -> None:
    doc = find(rendered_overlay("prod"), kind)[0]
    target = doc
    for key in path:
        target = target[key]
    target[typo] = 1
    with pytest.raises((kv.ValidationError, jsonschema.ValidationError)):
        validate(doc, GKE_VERSIONS[0])


def test_overlays_replace_every_placeholder_of_the_base(docs: list[Doc]) -> None:
    text = repr(docs)
    assert [p for p in PLACEHOLDERS if p in text] == []


def test_overlays_differ_where_environments_must(overlay: str) -> None:
    """dev and prod never share a namespace, host or project."""
    other = rendered_overlay("prod" if overlay == "dev" else "dev")
    mine = rendered_overlay(overlay)
    for kind in ("Namespace", "ManagedCertificate", "ServiceAccount"):
        assert find(mine, kind) != find(other, kind), kind
