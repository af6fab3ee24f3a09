"""The alert rules and the Grafana dashboard use only metrics (and labels) the service exports,
and docs/operations.md names every one of them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.http import state_metrics as metrics_state
from consumer.http.app import create_app
from consumer.jobs.store import enqueue
from consumer.observe import metrics
from consumer.service import Service
from consumer.wire.envelopes_out import tick_body
from tests.jobs import kinds_plugin
from tests.support.metrics_text import samples

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "k8s" / "base" / "monitoring"
OPERATIONS = ROOT / "docs" / "operations.md"
METRIC = re.compile(r"\b(consumer_[a-z0-9_]+)\b")
SELECTOR = re.compile(r"\b(consumer_[a-z0-9_]+)\{([^}]*)\}")
LABEL_KEY = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


def rule_expressions() -> dict[str, str]:
    rules = yaml.safe_load((MONITORING / "rules.yaml").read_text())
    return {
        rule["alert"]: rule["expr"] for group in rules["spec"]["groups"] for rule in group["rules"]
    }


def dashboard_expressions() -> dict[str, str]:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return {
        f"{panel['title']} {target['refId']}": target["expr"]
        for panel in dashboard["panels"]
        for target in panel["targets"]
    }


def declared() -> dict[str, set[str]]:
    """Sample names of the process metrics (even before any sample) and of the state gauges,
    with their labels."""
    exported = {name: set(labels) for name, (_, labels) in metrics_state.GAUGES.items()}
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            name, labels = value._name, set(value._labelnames)
            if value._type == "counter":
                exported[f"{name}_total"] = labels
            elif value._type == "histogram":
                exported.update({f"{name}{s}": labels | {"le"} for s in HISTOGRAM_SUFFIXES})
            else:
                exported[name] = labels
    return exported


@pytest.fixture
def exported(settings: Settings, engine: Engine) -> dict[str, set[str]]:
    """What a real app's /metrics shows after a sweep, a rejected push and an unroutable one,
    plus the declared process metrics."""
    kinds_plugin.runs_metadata.create_all(engine)
    app = create_app(Service.of(settings.with_values(plugins=("tests.jobs.kinds_plugin",)), engine))
    client = app.test_client()
    enqueue(engine, "record", {"fail": "permanent"}, kinds=["record"])
    client.post("/push", json=tick_body("sweep"))
    client.post("/push", data=b"not json")
    names = declared()
    for name, labels, _ in samples(client.get("/metrics").get_data(as_text=True)):
        names.setdefault(name, set()).update(labels)
    return names


def problems(expressions: dict[str, str], exported: dict[str, set[str]]) -> list[str]:
    found = []
    for where, expr in expressions.items():
        used = set(METRIC.findall(expr))
        found += [f"{where}: {name} is not exported" for name in used - exported.keys()]
        for name, selector in SELECTOR.findall(expr):
            unknown = set(LABEL_KEY.findall(selector)) - exported.get(name, set())
            found += [f"{where}: {name} has no label {label}" for label in unknown]
        known = set().union(*(exported.get(name, set()) for name in used))
        for grouping in GROUPING.findall(expr):
            labels = {label.strip() for label in grouping.split(",") if label.strip()}
            found += [f"{where}: no metric has label {label}" for label in labels - known]
    return found


@pytest.mark.parametrize(
    "expressions", [rule_expressions, dashboard_expressions], ids=["rules", "dashboard"]
)
def test_every_metric_and_label_used_is_exported(
    exported: dict[str, set[str]], expressions: Callable[[], dict[str, str]]
) -> None:
    assert problems(expressions(), exported) == []


def test_the_check_catches_a_misspelt_name_or_label(exported: dict[str, set[str]]) -> None:
    assert len(problems({"a": "max(consumer_oldest_due_jobs_age_seconds)"}, exported)) == 1
    assert len(problems({"b": 'sum(consumer_job_results_total{kinds="x"})'}, exported)) == 1
    assert len(problems({"c": "sum by (kinds) (consumer_job_results_total)"}, exported)) == 1
    assert (
        problems({"d": 'sum by (kind) (consumer_job_results_total{result="dead"})'}, exported) == []
    )


def test_the_rules_cover_what_an_operator_must_hear_about() -> None:
    expressions = " ".join(rule_expressions().values())
    for needed in (
        "consumer_oldest_due_job_age_seconds",
        "consumer_tick_last_slot_timestamp_seconds",
        'result="dead"',
        'status="dead"',
        'status="503"',
        "consumer_oidc_cert_fetch_failures_total",
    ):
        assert needed in expressions


def test_operations_doc_names_every_exported_metric(exported: dict[str, set[str]]) -> None:
    text = OPERATIONS.read_text()
    base = {re.sub(r"_(bucket|count|sum|created)$", "", name) for name in exported}
    missing = sorted(name for name in base if name.startswith("consumer_") and name not in text)
    assert missing == []
    for alert in rule_expressions():
        assert alert in text, alert
