"""The alert rules the overlays ship, evaluated by Prometheus's own ``promtool``: the rule groups
of every Rules/PrometheusRule object pass ``promtool check rules``, and ``promtool test rules``
shows every alert firing on series that mean trouble (with its labels and rendered annotations)
and silent on healthy ones (the series: ``tests.deploy_artifacts.alert_cases``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy_artifacts.alert_cases import CASES, Case
from tests.deploy_artifacts.artifacts import Doc
from tests.deploy_artifacts.prometheus_rules import alert_rules, rule_groups, write_rules

EVALUATION_INTERVAL = "1m"


def expected_alerts(rule: Doc, case: Case) -> list[Doc]:
    """The alerts ``case`` expects: the rule's labels with the alert's own, and the annotations
    with ``{{ $labels.x }}`` and the case's other templates rendered."""
    alerts = []
    for extra in case.fires:
        labels = {**rule.get("labels", {}), **extra}
        renders = {**case.renders, **{f"{{{{ $labels.{k} }}}}": v for k, v in labels.items()}}
        annotations = {}
        for key, template in rule.get("annotations", {}).items():
            for placeholder, rendered in renders.items():
                template = template.replace(placeholder, rendered)
            assert "{{" not in template, f"{rule['alert']}: say how {template!r} renders"
            annotations[key] = template
        alerts.append({"exp_labels": labels, "exp_annotations": annotations})
    return alerts


def unit_tests(rules_file: str, alerts: dict[str, Doc]) -> Doc:
    tests = []
    for name, cases in CASES.items():
        for case in cases:
            tests.append(
                {
                    "name": f"{name} {'fires' if case.fires else 'stays silent'}",
                    "interval": EVALUATION_INTERVAL,
                    "input_series": [{"series": s, "values": v} for s, v in case.series],
                    "alert_rule_test": [
                        {
                            "eval_time": case.at,
                            "alertname": name,
                            "exp_alerts": expected_alerts(alerts[name], case),
                        }
                    ],
                }
            )
    return {
        "rule_files": [rules_file],
        "evaluation_interval": EVALUATION_INTERVAL,
        "tests": tests,
    }


def promtool() -> str:
    binary = shutil.which("promtool")
    if binary is None:
        reason = "promtool is missing: scripts/ensure-prometheus installs Debian's prometheus"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return binary


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_every_alert_has_a_firing_and_a_silent_case(docs: list[Doc]) -> None:
    alerts = alert_rules(rule_groups(docs))
    assert sorted(alerts) == sorted(CASES)
    for name, (firing, healthy) in CASES.items():
        assert firing.fires and not healthy.fires, name


def test_promtool_accepts_the_rules(docs: list[Doc], tmp_path: Path) -> None:
    path = write_rules(docs, tmp_path)
    result = run("check", "rules", path.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_fires_on_trouble_and_is_silent_when_healthy(
    docs: list[Doc], tmp_path: Path
) -> None:
    path = write_rules(docs, tmp_path)
    tests: Any = unit_tests(path.name, alert_rules(rule_groups(docs)))
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = run("test", "rules", "tests.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
