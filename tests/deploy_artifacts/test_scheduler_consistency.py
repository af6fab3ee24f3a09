"""Terraform's Cloud Scheduler jobs agree with the ticks the service registers: a target block
(Pub/Sub or HTTP) that reaches the tick route with the right audience, a job for every built-in
task in its configured schedule and zone, and runs that fall each in its own registered slot,
none missed, across clock changes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from itertools import product, takewhile
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim

from consumer.config.settings import Settings
from consumer.http import routes
from consumer.pipeline.decision_log import Source
from consumer.plugins import build_registry
from consumer.wire.classify import classify
from consumer.wire.envelope import parse_push
from consumer.wire.envelopes_out import wrapped_body
from consumer.wire.events import TickEvent
from consumer.wire.schedule import Cron, Every, Schedule
from tests.deploy_artifacts.artifacts import TERRAFORM
from tests.deploy_artifacts.terraform import Module, evaluate

DAY = 24 * 3600

PUBLISH_DELAYS = (timedelta(0), timedelta(seconds=3))
"""Cloud Scheduler publishes at or a little after the fire time: publishTime decides the slot."""
WINDOWS = tuple(
    datetime(2027, month, day, tzinfo=UTC)
    for month, day in ((1, 4), (3, 12), (3, 26), (10, 29), (11, 5))
)  # an ordinary week, then the days around US and EU clock changes (spring and fall)
WINDOW = timedelta(days=4)


def scheduler_job(values: dict[str, Any], task: str) -> Cron:
    """The Cloud Scheduler job Terraform creates for ``task``: its cron and time zone."""
    job = values["tick_schedules"][task]
    return Cron(job["schedule"], job.get("time_zone", "Etc/UTC"))


def runs(job: Cron, start: datetime) -> list[datetime]:
    """The job's fire times in ``[start, start + WINDOW)``, in UTC."""
    fires = CronSim(job.expression, start.astimezone(ZoneInfo(job.timezone)))
    return [fire.astimezone(UTC) for fire in takewhile(lambda f: f < start + WINDOW, fires)]


def disagreement(job: Cron, registered: Schedule) -> str:
    """Why the Scheduler job and the registered schedule disagree, or ``""``: each run must land
    in its own slot (else a run is answered ``duplicate``) and the slot right after the previous
    run's (else a slot is never ticked), whatever the publish delay and the clock changes; a cron
    task's runs must be its fire times (the same schedule in the same zone)."""
    for start, delay in product(WINDOWS, PUBLISH_DELAYS):
        times = runs(job, start)
        slots = [registered.slot_of(run + delay) for run in times]
        for run, slot in zip(times, slots, strict=True):
            if isinstance(registered, Cron) and slot != run:
                return f"the run at {run.isoformat()} is not a fire time of {registered}"
        for run, slot, earlier in zip(times[1:], slots[1:], slots, strict=False):
            if slot == earlier:
                return f"the run at {run.isoformat()} shares slot {slot.isoformat()}"
            if registered.previous(slot) != earlier:
                return f"a slot before the run at {run.isoformat()} gets no run"
    return ""


def scheduled_tick(module: Module, values: dict[str, Any], task: str) -> TickEvent:
    """The message the Cloud Scheduler job for ``task`` publishes, as the service classifies it."""
    target = scheduler_target(module, "pubsub_target")
    assert target["topic_name"] == '${google_pubsub_topic.events["ticks"].id}'
    job = values["tick_schedules"][task]
    attributes = {k: evaluate(v, {}, (task, job)) for k, v in target["attributes"].items()}
    data = json.dumps({"task": task}).encode()  # base64encode(jsonencode({task = each.key}))
    assert target["data"] == "${base64encode(jsonencode({task = each.key}))}"
    body = json.dumps(wrapped_body(data, attributes)).encode()
    registry = build_registry(Settings(local_mode=True))
    event = classify(parse_push({}, body), registry.schedule_of)
    assert isinstance(event, TickEvent)
    return event


def scheduler_target(module: Module, kind: str) -> dict[str, Any]:
    """The content of the job's ``dynamic`` target block ``kind`` (one of them, by tick_target)."""
    blocks = module.resource("google_cloud_scheduler_job", "tick")["dynamic"]
    (found,) = [block[kind] for block in blocks if kind in block]
    return dict(found["content"][0])


def test_the_tick_target_chooses_pubsub_or_http(module: Module) -> None:
    """One target block per job whichever is chosen; ``pubsub`` by default."""
    assert module.default("tick_target") == "pubsub"
    assert '["pubsub", "http"]' in str(module.variables["tick_target"]["validation"])
    choices = {
        kind: scheduler_target(module, kind) and block[kind]["for_each"]
        for block in module.resource("google_cloud_scheduler_job", "tick")["dynamic"]
        for kind in block
    }
    assert choices == {
        "pubsub_target": '${var.tick_target == "pubsub" ? [each.key] : []}',
        "http_target": '${var.tick_target == "http" ? [each.key] : []}',
    }


def test_http_ticks_reach_the_tick_route_with_a_token_for_its_audience(
    module: Module, tmp_path: Path
) -> None:
    """The HTTP target POSTs /ticks/TASK (a route of the app) with an OIDC token whose audience
    is the one the service is told (the consumer_config output), and a body naming the task."""
    target = scheduler_target(module, "http_target")
    assert target["http_method"] == "POST"
    assert target["uri"] == "${local.tick_endpoint}/${each.key}"
    assert target["body"] == "${base64encode(jsonencode({task = each.key}))}"
    token = target["oidc_token"][0]
    assert token["audience"] == "${local.tick_audience}"
    assert token["service_account_email"] == "${google_service_account.scheduler[0].email}"
    outputs = (TERRAFORM / "outputs.tf").read_text()
    assert "CONSUMER_TICK_HOOK_AUDIENCE         = local.tick_audience" in outputs
    assert "google_service_account.scheduler[0].email" in outputs
    project = (TERRAFORM / "project.tf").read_text()
    assert 'tick_endpoint = "${trimsuffix(var.push_endpoint, "/push")}/ticks"' in project
    found = routes.match(routes.TABLE, "/ticks/sweep")
    assert found is not None and found.route.source is Source.TICKS


def test_every_built_in_tick_task_has_a_scheduler_job(module: Module) -> None:
    registry = build_registry(Settings(local_mode=True))
    assert set(registry.tasks) <= set(module.default("tick_schedules"))


def test_scheduler_jobs_use_the_configured_schedule_and_zone(module: Module) -> None:
    job = module.resource("google_cloud_scheduler_job", "tick")
    spec = ("sweep", {"schedule": "0 9 * * 1-5", "time_zone": "Europe/Madrid"})
    assert evaluate(job["schedule"], {}, spec) == "0 9 * * 1-5"
    assert evaluate(job["time_zone"], {}, spec) == "Europe/Madrid"
    assert 'optional(string, "Etc/UTC")' in module.variables["tick_schedules"]["type"]


@pytest.mark.parametrize("task", ["sweep", "cleanup"])
def test_scheduler_runs_are_the_registered_slots(
    module: Module, values: dict[str, Any], task: str
) -> None:
    registry = build_registry(Settings(local_mode=True))
    if task not in registry.tasks:
        pytest.skip(f"tick task {task!r} is not registered in this build (its feature is absent)")
    event = scheduled_tick(module, values, task)
    assert event.task == task and event.schedule == registry.tasks[task].schedule
    assert disagreement(scheduler_job(values, task), event.schedule) == ""


@pytest.mark.parametrize(
    ("job", "registered", "reported"),
    [
        (Cron("0 9 * * 1-5", "Europe/Madrid"), Cron("0 9 * * 1-5", "Europe/Madrid"), ""),
        (Cron("17 0 * * *", "Europe/Madrid"), Every(DAY), ""),
        (Cron("*/5 * * * *", "Etc/UTC"), Every(300), ""),
        (Cron("0 9 * * 1-5", "Etc/UTC"), Cron("0 9 * * 1-5", "Europe/Madrid"), "not a fire"),
        (Cron("0 8 * * 1-5", "Etc/UTC"), Cron("0 9 * * 1-5", "Europe/Madrid"), "not a fire"),
        (Cron("0 9 * * 1-5", "Europe/Madrid"), Every(DAY), "gets no run"),
        (Cron("*/1 * * * *", "Etc/UTC"), Every(300), "shares slot"),
        (Cron("*/10 * * * *", "Etc/UTC"), Every(300), "gets no run"),
        (Cron("30 2 * * *", "Europe/Madrid"), Cron("30 * * * *", "Europe/Madrid"), "no run"),
    ],
)
def test_disagreement_finds_shared_and_missed_slots(
    job: Cron, registered: Schedule, reported: str
) -> None:
    found = disagreement(job, registered)
    assert (reported in found) if reported else found == ""
