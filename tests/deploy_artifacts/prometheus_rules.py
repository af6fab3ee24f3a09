"""The alert rules the overlays ship, as Prometheus reads them: the rule groups of every
Rules/PrometheusRule object, by alert name, and written as one rule file."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.deploy_artifacts.artifacts import Doc

RULE_KINDS = ("Rules", "PrometheusRule", "ClusterRules", "GlobalRules")


def rule_groups(docs: list[Doc]) -> list[Doc]:
    """The rule groups of every rules object the overlay ships, as Prometheus reads them."""
    return [group for doc in docs if doc["kind"] in RULE_KINDS for group in doc["spec"]["groups"]]


def alert_rules(groups: list[Doc]) -> dict[str, Doc]:
    return {rule["alert"]: rule for group in groups for rule in group["rules"] if "alert" in rule}


def write_rules(docs: list[Doc], directory: Path, interval: str | None = None) -> Path:
    """The overlay's rule groups as one Prometheus rule file; ``interval`` replaces each group's
    evaluation interval (a live test cannot wait up to a whole 60 s group interval for the first
    evaluation: Prometheus offsets each group's start within its interval)."""
    groups = rule_groups(docs)
    assert groups, "the overlay ships no alert rules"
    if interval is not None:
        groups = [{**group, "interval": interval} for group in groups]
    path = directory / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path
