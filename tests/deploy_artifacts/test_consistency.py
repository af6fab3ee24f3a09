"""Terraform, the manifests, the image and the service's defaults agree: the timing chain, the push
identity and audience, Workload Identity, health checks, and the scheduler's cadence."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import product, takewhile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim

from consumer.config.settings import Settings
from consumer.http import routes
from consumer.pipeline.decisions import Source
from consumer.plugins import build_registry
from consumer.wire.classify import classify
from consumer.wire.envelope import parse_push
from consumer.wire.envelopes_out import wrapped_body
from consumer.wire.events import TickEvent
from consumer.wire.schedule import Cron, Every, Schedule
from tests.deploy_artifacts.artifacts import TERRAFORM, Doc, config_env, one, pod_spec
from tests.deploy_artifacts.terraform import Module, evaluate
from tests.deploy_artifacts.timing import Chain, gather, problems, service_settings

DAY = 24 * 3600


@pytest.fixture(scope="module")
def module() -> Module:
    return Module.load(TERRAFORM)


def tfvars(overlay: str) -> Path:
    return TERRAFORM / f"{overlay}.example.tfvars"


@pytest.fixture
def values(module: Module, overlay: str) -> dict[str, Any]:
    return module.values(tfvars(overlay))


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
