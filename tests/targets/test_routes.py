"""Routes that mean what they say, through the real /push view on both databases: a custom or
Eventarc CloudEvent type reaches the handler or target registered for it (and a declaration that
could never be reached is refused at start); a storage target is sent the object its event's
attributes named, and data naming another object is refused."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from bench.support.target_servers import PyTarget
from consumer.config.settings import Settings
from consumer.config.targets import TargetSettings, target
from consumer.errors import SettingsError
from consumer.http.app import create_app
from consumer.pipeline.registry import Registry
from consumer.plugins import build_registry
from consumer.service import Service, compose
from consumer.targets.install import install_targets
from consumer.wire.envelopes_out import storage_body

PAID = "com.example.invoice.paid"
AUDIT = "google.cloud.audit.log.v1.written"


def binary(event_type: str, data: dict[str, Any], event_id: str = "e1") -> dict[str, Any]:
    headers = {"ce-id": event_id, "ce-source": "//billing.example.com", "ce-type": event_type,
               "ce-specversion": "1.0", "ce-time": "2026-03-01T12:00:00Z",
               "ce-subject": "invoices/42", "Content-Type": "application/json"}  # fmt: skip
    return {"headers": headers, "data": json.dumps(data)}


def client_for(
    settings: Settings, engine: Engine, url: str, serves: dict[str, Any], registry: Registry
) -> Iterator[FlaskClient]:
    spec = target("billing", url=url, serves=serves, auth={"type": "none"})
    settings = dataclasses.replace(settings, targets=TargetSettings(targets=(spec,)))
    install_targets(registry, settings)
    yield create_app(Service(settings, registry, engine)).test_client()


@pytest.fixture
def registry(settings: Settings) -> Registry:
    return build_registry(settings)


@pytest.mark.parametrize("event_type", [PAID, AUDIT])
def test_a_cloudevent_type_reaches_its_target(
    py_target: PyTarget, settings: Settings, engine: Engine, registry: Registry, event_type: str
) -> None:
    serves = {"cloudevent": event_type}
    for client in client_for(settings, engine, py_target.url, serves, registry):
        data = {"invoice": 42, "task": "not-a-tick"}
        answer = client.post("/push", **binary(event_type, data))
        assert answer.status_code == 200, answer.get_json()
        assert answer.get_json()["outcome"] == "done"
        [received] = py_target.received
        assert received.headers["ce-type"] == event_type and json.loads(received.body) == data
        assert client.post("/push", **binary(event_type, data)).get_json()["outcome"] == "duplicate"
    assert len(py_target.received) == 1


def test_a_cloudevent_type_reaches_its_handler_in_structured_mode_too(
    settings: Settings, engine: Engine, registry: Registry
) -> None:
    seen: list[Any] = []
    registry.cloudevent(PAID, lambda context, event: seen.append(event) or {"ok": True})
    client = create_app(Service(settings, registry, engine)).test_client()
    document = {"specversion": "1.0", "id": "e2", "source": "//billing.example.com",
                "type": PAID, "time": "2026-03-01T12:00:00Z", "data": {"invoice": 7}}  # fmt: skip
    answer = client.post(
        "/push", data=json.dumps(document), content_type="application/cloudevents+json"
    )
    assert answer.status_code == 200 and answer.get_json()["outcome"] == "done", answer.get_json()
    [event] = seen
    assert json.loads(event.message.data) == {"invoice": 7}
    assert event.message.cloudevent.type == PAID


def test_a_cloudevent_without_a_time_is_a_clear_400(
    settings: Settings, engine: Engine, registry: Registry
) -> None:
    client = create_app(Service(settings, registry, engine)).test_client()
    request = binary(PAID, {"invoice": 1})
    del request["headers"]["ce-time"]
    answer = client.post("/push", **request)
    assert answer.status_code == 400 and "'time' is missing" in answer.get_data(as_text=True)


def test_a_storage_type_declared_as_a_cloudevent_is_refused_at_start() -> None:
    storage_type = "google.cloud.storage.object.v1.finalized"
    with pytest.raises(SettingsError, match="storage event"):
        Registry().cloudevent(storage_type, lambda context, event: None)
    declared = [{"name": "files", "url": "http://files.internal/", "auth": {"type": "none"},
                 "serves": {"cloudevent": storage_type}}]  # fmt: skip
    env = {"CONSUMER_LOCAL_MODE": "true", "CONSUMER_HTTP_TARGETS": json.dumps(declared)}
    with pytest.raises(SettingsError, match=r"HTTP target 'files': .*storage event"):
        compose(env)


def test_a_storage_target_is_sent_the_object_its_attributes_name(
    py_target: PyTarget, settings: Settings, engine: Engine, registry: Registry
) -> None:
    serves = {"storage": "uploads", "prefix": "orders/"}
    for client in client_for(settings, engine, py_target.url, serves, registry):
        body = storage_body("uploads", "orders/a.csv", "7", resource={"size": "12"})
        assert client.post("/push", json=body).get_json()["outcome"] == "done"
    [received] = py_target.received
    sent = json.loads(received.body)
    assert (sent["bucket"], sent["name"], sent["generation"], sent["size"]) == (
        "uploads", "orders/a.csv", "7", "12",
    )  # fmt: skip


@pytest.mark.parametrize(
    "resource",
    [{"bucket": "payroll"}, {"name": "secrets/keys.csv"}, {"generation": "1"}],
    ids=["bucket", "name", "generation"],
)
def test_data_naming_another_object_than_the_attributes_is_refused(
    py_target: PyTarget, settings: Settings, engine: Engine, registry: Registry,
    resource: dict[str, str],
) -> None:  # fmt: skip
    serves = {"storage": "uploads", "prefix": "orders/"}
    for client in client_for(settings, engine, py_target.url, serves, registry):
        body = storage_body("uploads", "orders/a.csv", "7", resource=resource)
        answer = client.post("/push", json=body).get_json()
        assert answer["outcome"] == "dead" and "refused" in answer["error"], answer
    assert py_target.received == []
