"""The timing chain, gathered from every artefact that holds a piece of it, and its rules.

Pub/Sub waits ``ack_deadline_seconds`` for a push response; the service's handler budget ends a
safety margin earlier; gunicorn kills a worker at the same deadline and lets a stopping pod finish
for as long; Kubernetes waits out the preStop pause plus that; the load balancer neither cuts a
request nor drops a draining pod before Pub/Sub gives up; the liveness probe tolerates a worker
busy for a whole deadline; Pub/Sub dead-letters only after the inbox had its chance."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from consumer.config.settings import Settings
from tests.deploy_artifacts.artifacts import (
    POD_SECRETS,
    Doc,
    config_env,
    dockerfile,
    gunicorn_config,
    image_command,
    image_env,
    one,
    pod_spec,
    prestop_seconds,
)
from tests.deploy_artifacts.terraform import Module, evaluate


@dataclass(frozen=True)
class Chain:
    service_default_ack: int
    terraform_default_ack: int
    configmap_ack: int
    subscription_acks: frozenset[int]
    handler_budget: float
    lease: int
    gunicorn_timeout: int
    gunicorn_graceful: int
    worker_class: str
    prestop: int
    grace: int
    liveness_tolerance: int
    lb_timeout: int
    lb_draining: int
    inbox_max_attempts: int
    max_delivery_attempts: int


def service_settings(docs: list[Doc]) -> Settings:
    """The settings a pod builds from the overlay's ConfigMap and its Secret (also proves the
    ConfigMap valid)."""
    return Settings.from_env({**config_env(docs), **POD_SECRETS})


def gather(docs: list[Doc], module: Module, values: dict[str, object]) -> Chain:
    settings = service_settings(docs)
    web = one(docs, "Deployment", "consumer")
    container = pod_spec(web)["containers"][0]
    liveness = container["livenessProbe"]
    backend = one(docs, "BackendConfig")["spec"]
    gunicorn = container_gunicorn(docs)
    subscriptions = module.of_kind("google_pubsub_subscription")["push"]
    return Chain(
        service_default_ack=Settings().inbox.ack_deadline_seconds,
        terraform_default_ack=int(module.default("ack_deadline_seconds")),
        configmap_ack=settings.inbox.ack_deadline_seconds,
        subscription_acks=frozenset({int(evaluate(subscriptions["ack_deadline_seconds"], values))}),
        handler_budget=settings.handler_budget_seconds,
        lease=settings.lease_seconds,
        gunicorn_timeout=int(gunicorn["timeout"]),
        gunicorn_graceful=int(gunicorn["graceful_timeout"]),
        worker_class=str(gunicorn["worker_class"]),
        prestop=prestop_seconds(container),
        grace=int(pod_spec(web)["terminationGracePeriodSeconds"]),
        liveness_tolerance=int(liveness["periodSeconds"]) * int(liveness["failureThreshold"]),
        lb_timeout=int(backend["timeoutSec"]),
        lb_draining=int(backend["connectionDraining"]["drainingTimeoutSec"]),
        inbox_max_attempts=settings.inbox.max_attempts,
        max_delivery_attempts=int(
            evaluate(subscriptions["dead_letter_policy"][0]["max_delivery_attempts"], values)
        ),
    )


def container_gunicorn(docs: list[Doc]) -> dict[str, object]:
    """gunicorn's effective settings for the image's command, in the pod's environment."""
    return _gunicorn_in(tuple(sorted(config_env(docs).items())))


@functools.cache
def _gunicorn_in(configmap: tuple[tuple[str, str], ...]) -> dict[str, object]:
    instructions = dockerfile()
    env = {k: v for k, v in image_env(instructions).items() if k != "PATH"}
    env.update(configmap)
    env.update(POD_SECRETS)
    return gunicorn_config(image_command(instructions), env)


def problems(chain: Chain) -> list[str]:
    c = chain
    ack = c.configmap_ack
    rules = [
        (c.terraform_default_ack == c.service_default_ack, "Terraform and service defaults differ"),
        (
            c.subscription_acks == {ack},
            "subscription ack deadline != CONSUMER_ACK_DEADLINE_SECONDS",
        ),
        (0 < c.handler_budget < ack, "handler budget not inside the ack deadline"),
        (c.gunicorn_timeout == ack, "gunicorn --timeout != ack deadline"),
        (c.gunicorn_graceful == ack, "gunicorn --graceful-timeout != ack deadline"),
        (
            # Its watchdog is what ends a request at gunicorn's timeout (threads keep the
            # asyncio worker's heartbeat going, so gunicorn alone would not).
            c.worker_class == "consumer.http.worker.ConsumerWorker",
            "the image's gunicorn worker has no request watchdog",
        ),
        (c.lease >= 3, "inbox lease does not outlast three of its one-second heartbeats"),
        (c.grace > c.prestop + c.gunicorn_graceful, "grace period <= preStop + graceful timeout"),
        (c.liveness_tolerance > c.gunicorn_timeout, "liveness kills a worker busy within budget"),
        (c.lb_timeout >= ack, "load balancer timeout shorter than the ack deadline"),
        (ack <= c.lb_draining <= c.grace, "load balancer draining outside [ack deadline, grace]"),
        (c.max_delivery_attempts > c.inbox_max_attempts, "dead-lettered before the inbox gives up"),
    ]
    return [message for ok, message in rules if not ok]
