"""The registry is the one extension surface: every kind of extension, duplicates, routing by
route, entry-point plugins, and the public API."""

from __future__ import annotations

import importlib
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

import consumer
from consumer.config.settings import Settings
from consumer.errors import AlreadyRegistered, SettingsError
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.pipeline.decision_log import Source
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.registry import Registry
from consumer.plugins import build_registry
from consumer.wire.events import OtherEvent
from consumer.wire.message import CloudEventMeta, Format, PushMessage
from consumer.wire.schedule import Every


def message(cloudevent_type: str = "", **attributes: str) -> PushMessage:
    cloudevent = CloudEventMeta("ce-1", "//example", cloudevent_type) if cloudevent_type else None
    return PushMessage(
        f"m-{datetime.now(UTC).timestamp()}",
        datetime.now(UTC),
        data=b'{"hello": "world"}',
        attributes=attributes,
        subscription="projects/p/subscriptions/s",
        format=Format.CLOUDEVENT_BINARY if cloudevent else Format.WRAPPED,
        cloudevent=cloudevent,
    )


def echo(context: Any, event: OtherEvent) -> dict[str, Any]:
    return {"data": event.message.data.decode(), "key": event.key}


def test_every_kind_of_extension_lands_in_its_table() -> None:
    registry = Registry()
    registry.tick("nightly", 3600)(echo)
    registry.job_kind("sms")(echo)
    registry.processor("thumbnails")(echo)
    registry.warmer("search", services={"web"})(echo)
    registry.route("message", echo)
    registry.cloudevent("com.example.thing", echo)
    assert registry.tasks["nightly"].handler is echo and registry.schedule_of("nightly") == Every(
        3600
    )
    assert registry.job_kinds.get("sms") is echo and registry.processors.names() == ("thumbnails",)
    assert [spec.name for spec in registry.warmers.for_service("web")] == ["search"]
    assert registry.warmers.for_service("api") == []
    assert registry.resolve(OtherEvent(message())) is echo
    assert registry.resolve(OtherEvent(message("com.example.thing"))) is echo


@pytest.mark.parametrize(
    "register",
    [
        lambda r: r.job_kind("email")(echo),
        lambda r: r.processor("import-jobs")(echo),
        lambda r: r.warmer("http")(echo),
        lambda r: r.storage(echo),
        lambda r: r.deploy(echo),
    ],
)
def test_registering_a_taken_name_is_an_error_unless_replace(register: Any) -> None:
    registry = build_registry(Settings(local_mode=True))
    with pytest.raises(AlreadyRegistered, match="already registered"):
        register(registry)


def test_replace_true_replaces() -> None:
    registry = build_registry(Settings(local_mode=True))
    registry.job_kind("email", replace=True)(echo)
    registry.storage(echo, replace=True)
    assert registry.job_kinds.get("email") is echo and registry.storage_handler is echo


def test_an_unknown_route_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown route 'tick'"):
        Registry().route("tick", echo)


def test_replacing_the_storage_and_deploy_handlers_keeps_processors_and_warmers() -> None:
    """Built-ins were given the registry's tables, so replacing one handler cuts nothing off."""
    registry = build_registry(Settings(local_mode=True))
    storage, deploy = registry.storage_handler, registry.deploy_handler
    registry.storage(echo, replace=True)
    registry.deploy(echo, replace=True)
    registry.processor("late")(echo)
    registry.warmer("late")(echo)
    assert getattr(storage, "processors", None) is registry.processors
    assert getattr(deploy, "warmers", None) is registry.warmers
    assert "late" in registry.processors and "late" in registry.warmers


def test_messages_and_cloudevents_reach_plugin_handlers(settings: Settings, engine: Engine) -> None:
    """Before, these were recorded unroutable with no way for a plugin to take them."""
    registry = build_registry(settings)
    seen: list[str] = []

    def on_thing(context: Any, event: OtherEvent) -> dict[str, Any]:
        seen.append(event.message.cloudevent.type if event.message.cloudevent else "")
        return {"thing": True}

    dispatcher = Dispatcher(settings, engine, registry)
    unroutable = dispatcher.dispatch(message(kind="other"))
    assert unroutable.kind == "unroutable"
    registry.route("message", echo)
    registry.cloudevent("com.example.thing", on_thing)
    done = dispatcher.dispatch(message(kind="other"))
    assert done.kind == "done" and done.details["data"] == '{"hello": "world"}'
    thing = dispatcher.dispatch(message("com.example.thing"))
    assert thing.kind == "done" and thing.details["thing"] is True and seen == ["com.example.thing"]
    row = Inbox(engine).get(done.key)
    assert row is not None and row.status is Status.DONE


def test_the_handler_is_resolved_once_per_delivery(
    settings: Settings, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unroutable, handled or run unclaimed: one lookup each; every outcome carries its route."""
    registry = build_registry(settings)
    resolved: list[str] = []
    real = registry.resolve

    def counted(event: Any) -> Any:
        resolved.append(event.key)
        return real(event)

    monkeypatch.setattr(registry, "resolve", counted)
    dispatcher = Dispatcher(settings, engine, registry)
    unroutable = dispatcher.dispatch(message(kind="other"))
    registry.route("message", echo)
    done = dispatcher.dispatch(message(kind="other"))
    duplicate = dispatcher.dispatch(PushMessage.from_json(Inbox(engine).get(done.key).message))  # type: ignore[union-attr]
    unclaimed = dispatcher.run_unclaimed(OtherEvent(message(kind="other")), Source.CLI, None)
    kinds = [o.kind for o in (unroutable, done, duplicate, unclaimed)]
    assert kinds == ["unroutable", "done", "duplicate", "done"]
    assert len(resolved) == 3  # the duplicate was not claimed: nothing to resolve
    assert {o.route for o in (unroutable, done, duplicate, unclaimed)} == {"other"}


def test_public_api_and_no_re_exports_between_layers() -> None:
    """The errors handlers raise live in ``consumer.errors`` and are public from ``consumer``;
    the layers that use them do not offer them again (one import path per name)."""
    for name in ("Skip", "LeaseLost", "NotReplayable"):
        assert getattr(consumer, name) is getattr(consumer.errors, name), name
    offered = {
        "consumer.pipeline.dispatch": "Skip",
        "consumer.pipeline.context": "LeaseLost",
        "consumer.sources.replay": "NotReplayable",
    }
    for module_name, name in offered.items():
        module = importlib.import_module(module_name)
        assert name not in getattr(module, "__all__", ()), (module_name, name)
    assert not hasattr(importlib.import_module("consumer.pipeline.dispatch"), "Skip")
    for name in consumer.__all__:
        assert getattr(consumer, name) is not None, name
    assert {"Registry", "HandlerContext", "Settings", "create_app", "Skip"} <= set(consumer.__all__)
    assert (Path(consumer.__file__).parent / "py.typed").exists()
    with pytest.raises(AttributeError):
        _ = consumer.nothing_here


def write_dist(site: Path, value: str, module: str) -> None:
    """A tiny installed distribution declaring a ``consumer.plugins`` entry point."""
    (site / "tiny_plugin.py").write_text(textwrap.dedent(module))
    dist = site / "tiny_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[consumer.plugins]\ntiny = {value}\n")


@pytest.mark.parametrize("value", ["tiny_plugin", "tiny_plugin:register"])
def test_entry_point_plugins_are_discovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    module = """
        def register(registry):
            registry.job_kind("tiny")(lambda context, job: None)
    """
    write_dist(tmp_path, value, module)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tiny_plugin", raising=False)
    assert "tiny" in build_registry(Settings(local_mode=True)).job_kinds


def test_a_broken_entry_point_plugin_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = """
        def register(registry):
            registry.job_kind("email")(print)
    """
    write_dist(tmp_path, "tiny_plugin", module)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tiny_plugin", raising=False)
    with pytest.raises(SettingsError, match=r"entry point 'tiny'.*'email' is already registered"):
        build_registry(Settings(local_mode=True))


def test_the_documented_plugin_registers_every_kind_of_extension(
    settings: Settings, engine: Engine
) -> None:
    """docs/plugins.md's example, executed as written."""
    doc = (Path(__file__).parents[2] / "docs" / "plugins.md").read_text()
    code = doc.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/plugins.md", "exec"), namespace)
    registry = build_registry(settings)
    namespace["register"](registry)
    assert "nightly-report" in registry.tasks and "sms" in registry.job_kinds
    assert "thumbnails" in registry.processors and "search" in registry.warmers
    dispatcher = Dispatcher(settings, engine, registry)
    assert dispatcher.dispatch(message(kind="other")).details["bytes"] == 18
    invoice = dispatcher.dispatch(message("com.example.invoice.paid"))
    assert invoice.kind == "done" and invoice.details == {"invoice": "", "attempt": 1}
