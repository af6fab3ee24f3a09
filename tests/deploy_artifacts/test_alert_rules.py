"""The alert rules the overlays ship, evaluated by Prometheus's own ``promtool``: the rule groups
of every Rules/PrometheusRule object pass ``promtool check rules``, and ``promtool test rules``
shows every alert firing on series that mean trouble (with its labels and rendered annotations)
and silent on healthy ones. The series carry the names the service exports
(``consumer.observe.metrics``, ``consumer.http.state_metrics``); the labels a scrape adds
(``instance``) are written where the rule aggregates them away."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy_artifacts.artifacts import Doc

RULE_KINDS = ("Rules", "PrometheusRule", "ClusterRules", "GlobalRules")
EVALUATION_INTERVAL = "1m"
Series = list[tuple[str, str]]


@dataclass(frozen=True)
class Case:
    """Input series (one sample a minute), the time to look, and, if the alert must fire there,
    the labels each alert adds to the rule's own and how its annotations' templates render."""

    series: Series
    at: str
    fires: list[dict[str, str]] = field(default_factory=list)
    renders: dict[str, str] = field(default_factory=dict)


def fire(series: Series, at: str, *labels: dict[str, str], **renders: str) -> Case:
    return Case(series, at, list(labels) or [{}], {f"{{{{ {k} }}}}": v for k, v in renders.items()})


def silent(series: Series, at: str) -> Case:
    return Case(series, at)


DECISIONS = "consumer_push_decisions_total"
PERIOD = "consumer_tick_period_seconds"
SLOT = "consumer_tick_last_slot_timestamp_seconds"
DEAD_JOBS = 'consumer_job_results_total{kind="%s",result="dead",instance="%s"}'
DONE_JOBS = 'consumer_job_results_total{kind="record",result="done",instance="pod-a"}'
INBOX = 'consumer_inbox_rows{route="%s",status="%s"}'
REDRIVES = 'consumer_inbox_redrives_total{route="%s",instance="%s"}'
DURATION = "$value | humanizeDuration"
PERCENT = "$value | humanizePercentage"

CASES: dict[str, tuple[Case, Case]] = {
    "ConsumerJobsStuck": (
        # A job has waited 700 s; sweeps come every 300 s (another task's long period is ignored).
        fire(
            [
                ("consumer_oldest_due_job_age_seconds", "700x20"),
                (f'{PERIOD}{{task="sweep"}}', "300x20"),
                (f'{PERIOD}{{task="warm"}}', "3600x20"),
            ],
            "10m",
            **{DURATION: "11m 40s"},
        ),
        silent(
            [
                ("consumer_oldest_due_job_age_seconds", "500x20"),
                (f'{PERIOD}{{task="sweep"}}', "300x20"),
            ],
            "10m",
        ),
    ),
    "ConsumerSweepStalled": (
        # The last sweep slot stays at the epoch while the clock runs on (period: one minute).
        fire(
            [
                (f'{SLOT}{{task="sweep"}}', "0x20"),
                (f'{PERIOD}{{task="sweep"}}', "60x20"),
                (f'{PERIOD}{{task="warm"}}', "3600x20"),
            ],
            "10m",
            **{DURATION: "10m 0s"},
        ),
        # Each minute's sweep slot completes; a stale task other than the sweep does not count.
        silent(
            [
                (f'{SLOT}{{task="sweep"}}', "0+60x20"),
                (f'{PERIOD}{{task="sweep"}}', "60x20"),
                (f'{SLOT}{{task="warm"}}', "0x20"),
                (f'{PERIOD}{{task="warm"}}', "60x20"),
            ],
            "10m",
        ),
    ),
    "ConsumerTaskPausedTooLong": (
        # "report" was paused at the epoch; "sweep" two hours later (10 h 10 m before the look).
        fire(
            [
                ('consumer_task_paused{task="report",instance="pod-a"}', "0x740"),
                ('consumer_task_paused{task="report",instance="pod-b"}', "0x740"),
                ('consumer_task_paused{task="sweep",instance="pod-a"}', "7200x740"),
            ],
            "12h10m",
            {"task": "report"},
            **{DURATION: "12h 10m 0s"},
        ),
        # Paused 10 hours ago, and a task paused at the epoch was resumed (its series ended).
        silent(
            [
                ('consumer_task_paused{task="sweep",instance="pod-a"}', "7200x740"),
                ('consumer_task_paused{task="report",instance="pod-a"}', "0x600"),
            ],
            "12h10m",
        ),
    ),
    "ConsumerDeadJobsRising": (
        # A pod's counter of dead "record" jobs rises; another pod's first dead "export" job
        # creates its series at 1 (a labelled counter has no series before its first increment).
        fire(
            [
                (DEAD_JOBS % ("record", "pod-a"), "0x34 1x10"),
                (DEAD_JOBS % ("export", "pod-b"), "_x34 1x10"),
                (DONE_JOBS, "0+5x44"),
            ],
            "40m",
            {"kind": "export"},
            {"kind": "record"},
        ),
        # Jobs went dead 38 minutes ago and none since; done jobs go on.
        silent(
            [
                (DEAD_JOBS % ("record", "pod-a"), "2x44"),
                (DEAD_JOBS % ("export", "pod-b"), "_ 1x43"),
                (DONE_JOBS, "0+5x44"),
            ],
            "40m",
        ),
    ),
    "ConsumerDeadEventsRising": (
        # The first dead row of route storage (a status with no rows has no series), and one
        # more of route tick.
        fire(
            [
                (INBOX % ("storage", "dead"), "_x34 1x10"),
                (INBOX % ("tick", "dead"), "2x34 3x10"),
            ],
            "40m",
            {"route": "storage"},
            {"route": "tick"},
        ),
        # Old dead rows, one added 38 minutes ago; failed rows (retried) come and go.
        silent(
            [
                (INBOX % ("storage", "dead"), "3x44"),
                (INBOX % ("tick", "dead"), "1 2x43"),
                (INBOX % ("storage", "failed"), "0+1x44"),
            ],
            "40m",
        ),
    ),
    "ConsumerInboxRedrives": (
        # A pod re-drove a row of route tick 5 minutes ago; another pod's first re-drive of route
        # storage creates its series at 1.
        fire(
            [
                (REDRIVES % ("tick", "pod-a"), "0x34 1x5"),
                (REDRIVES % ("storage", "pod-b"), "_x34 1x5"),
            ],
            "39m",
            {"route": "storage"},
            {"route": "tick"},
        ),
        # Re-drives 38 minutes ago and none since.
        silent(
            [
                (REDRIVES % ("tick", "pod-a"), "0 2x44"),
                (REDRIVES % ("storage", "pod-b"), "_ 1x43"),
            ],
            "40m",
        ),
    ),
    "ConsumerUnavailableRatio": (
        # 10 of every 100 deliveries a minute are answered 503.
        fire(
            [
                (f'{DECISIONS}{{route="storage",outcome="unavailable",status="503"}}', "0+10x30"),
                (f'{DECISIONS}{{route="storage",outcome="done",status="200"}}', "0+90x30"),
            ],
            "25m",
            **{PERCENT: "10%"},
        ),
        # 1 in 100 (a blip), and server errors other than 503 are another alert's.
        silent(
            [
                (f'{DECISIONS}{{route="storage",outcome="unavailable",status="503"}}', "0+1x30"),
                (f'{DECISIONS}{{route="storage",outcome="error",status="500"}}', "0+10x30"),
                (f'{DECISIONS}{{route="storage",outcome="done",status="200"}}', "0+89x30"),
            ],
            "25m",
        ),
    ),
    "ConsumerServerErrors": (
        # 2 of every 100 deliveries a minute end in a 500.
        fire(
            [
                (f'{DECISIONS}{{route="tick",outcome="error",status="500"}}', "0+2x30"),
                (f'{DECISIONS}{{route="tick",outcome="done",status="200"}}', "0+98x30"),
            ],
            "25m",
            **{PERCENT: "2%"},
        ),
        # Many 503s (transient) and rejections, but no other server error.
        silent(
            [
                (f'{DECISIONS}{{route="tick",outcome="unavailable",status="503"}}', "0+20x30"),
                (f'{DECISIONS}{{route="-",outcome="rejected",status="400"}}', "0+20x30"),
                (f'{DECISIONS}{{route="tick",outcome="done",status="200"}}', "0+60x30"),
            ],
            "25m",
        ),
    ),
    "ConsumerCertificateFetchFailures": (
        fire([('consumer_oidc_cert_fetch_failures_total{instance="pod-a"}', "0x5 1x10")], "10m"),
        # Failures long ago, none in the last 15 minutes.
        silent([('consumer_oidc_cert_fetch_failures_total{instance="pod-a"}', "0 3x30")], "25m"),
    ),
    "ConsumerStateUnreadable": (
        fire(
            [
                ('consumer_state_up{instance="pod-a"}', "0x30"),
                ('consumer_state_up{instance="pod-b"}', "0x30"),
            ],
            "20m",
        ),
        # One pod cannot read the state; another can.
        silent(
            [
                ('consumer_state_up{instance="pod-a"}', "0x30"),
                ('consumer_state_up{instance="pod-b"}', "1x30"),
            ],
            "20m",
        ),
    ),
    "ConsumerMetricsAbsent": (
        # The pods were scraped for five minutes, then no more.
        fire([('consumer_state_up{instance="pod-a"}', "1x5")], "30m"),
        silent([('consumer_state_up{instance="pod-a"}', "1x30")], "30m"),
    ),
}


def rule_groups(docs: list[Doc]) -> list[Doc]:
    """The rule groups of every rules object the overlay ships, as Prometheus reads them."""
    return [group for doc in docs if doc["kind"] in RULE_KINDS for group in doc["spec"]["groups"]]


def alert_rules(groups: list[Doc]) -> dict[str, Doc]:
    return {rule["alert"]: rule for group in groups for rule in group["rules"] if "alert" in rule}


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
