"""Declaring targets: the settings and plugins' way, each mistake one line naming it, and the
installed handlers in the registry's tables (none when no target is declared)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from consumer.errors import SettingsError
from consumer.pipeline.registry import Registry
from consumer.service import compose
from consumer.targets.install import EventTarget, InFront, JobTarget
from tests.conftest import free_port, gunicorn_command, server_env

URL = "http://orders.internal/tasks/process-pending"


def env(*targets: dict[str, Any]) -> dict[str, str]:
    return {"CONSUMER_LOCAL_MODE": "true", "CONSUMER_HTTP_TARGETS": json.dumps(list(targets))}


def declared(name: str = "orders", **changes: Any) -> dict[str, Any]:
    spec = {"name": name, "url": URL, "serves": {"tick": "process-pending", "period_seconds": 60},
            "auth": {"type": "none"}}  # fmt: skip
    return {**spec, **changes}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"url": "ftp://orders.internal/x"}, r"url: must be an http\(s\) URL with a host"),
        ({"url": "http://user:pw@orders.internal/"}, "must not carry user:password@"),
        ({"auth": None}, "auth: must be"),
        ({"auth": {"type": "hmac", "secrets": ["short"]}}, r"16\+ characters"),
        ({"serves": {"tick": "x"}}, "period_seconds or cron"),
        ({"serves": {"tick": "x", "period_seconds": 60, "deploy": "web"}}, "exactly one"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"concurrency": 0}, "concurrency must be 1..256"),
        ({"headers": {}}, "unknown key"),
    ],
)
def test_a_bad_declaration_is_one_line_naming_it(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError, match=message) as raised:
        compose(env(declared(**changes)))
    assert str(raised.value).startswith("CONSUMER_HTTP_TARGETS: target 'orders': ")
    assert "\n" not in str(raised.value)


def test_a_server_with_a_refused_url_does_not_start_and_says_why_in_one_line() -> None:
    command = gunicorn_command(free_port(), workers=1)
    bad = env(declared(url="file:///etc/passwd"))
    done = subprocess.run(command, env=server_env(bad), capture_output=True, timeout=60)
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode != 0
    wanted = "consumer: CONSUMER_HTTP_TARGETS: target 'orders': url: must be an http(s) URL"
    assert [line for line in lines if "CONSUMER_HTTP_TARGETS" in line] == [
        f"{wanted} with a host"
    ], lines


def test_each_target_lands_in_the_table_of_what_it_serves() -> None:
    service = compose(
        env(
            declared(),
            declared("files", serves={"storage": "uploads", "prefix": "orders/"}),
            declared("web", serves={"deploy": "web"}),
            declared("created", serves={"cloudevent": "com.example.order.created"}),
            declared("jobs", serves={"job_kind": "process-order"}),
        )
    )
    registry = service.registry
    assert isinstance(registry.tasks["process-pending"].handler, EventTarget)
    assert isinstance(registry.routes.get("storage"), InFront)
    assert isinstance(registry.routes.get("deploy"), InFront)
    assert isinstance(registry.cloudevents.get("com.example.order.created"), EventTarget)
    assert isinstance(registry.job_kinds.get("process-order"), JobTarget)
    assert service.registry.schedule_of("process-pending").seconds == 60  # type: ignore[union-attr]


def test_no_target_leaves_the_registry_as_it_was() -> None:
    plain = compose({"CONSUMER_LOCAL_MODE": "true"}).registry
    assert not isinstance(plain.routes.get("storage"), InFront)
    assert not isinstance(plain.routes.get("deploy"), InFront)


def test_a_plugin_declares_a_target_and_a_clash_is_named() -> None:
    registry = Registry()
    registry.http_target("orders", url=URL, serves={"message": True}, auth={"type": "none"})
    with pytest.raises(SettingsError, match="HTTP target 'bad': url"):
        registry.http_target("bad", url="nope", serves={"message": True}, auth={"type": "none"})
    with pytest.raises(SettingsError, match="tick task 'sweep' is already registered"):
        compose(env(declared(serves={"tick": "sweep", "period_seconds": 60})))
