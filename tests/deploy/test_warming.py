"""The deploy handler through the real Dispatcher and inbox, on SQLite and PostgreSQL: each
release warms once, every run is recorded, user warmers plug in."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine

from bench.support.deploy_targets import TargetServer
from consumer.config.settings import Settings
from consumer.deploy.store import WarmRuns
from consumer.deploy.warming import warmers_of
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.wire.envelope import Limits, parse_wrapped
from consumer.wire.envelopes_out import deploy_body, wrapped_body
from consumer.wire.message import PushMessage
from tests.conftest import Clock
from tests.deploy import plugin


@pytest.fixture(autouse=True)
def fresh_plugin_calls() -> Iterator[None]:
    plugin.calls.clear()
    yield
    plugin.calls.clear()


def dispatcher(
    settings: Settings, engine: Engine, clock: Clock | None = None, **changes: Any
) -> Dispatcher:
    config = Settings.of(database_url=settings.database_url, local_mode=True, **changes)
    return Dispatcher(config, engine, build_registry(config), clock or Clock())


def deploy(service: str, release: str, **fields: str) -> PushMessage:
    return parse_wrapped(deploy_body(service, release, **fields), Limits())


def test_the_same_release_announced_twice_warms_once(
    settings: Settings, engine: Engine, targets: TargetServer
) -> None:
    urls = targets.urls("ok", 30)
    runner = dispatcher(settings, engine, warm_targets=tuple(urls), warm_concurrency=4)
    first = runner.dispatch(deploy("web", "v1", environment="prod"))
    again = runner.dispatch(deploy("web", "v1"))
    assert (first.kind, again.kind) == ("done", "duplicate")
    assert first.details["warmers"][0] | {"duration_ms": 0, "p50_ms": 0, "p95_ms": 0} == {
        "warmer": "http", "ok": 30, "failed": 0, "not_reached": 0,
        "duration_ms": 0, "p50_ms": 0, "p95_ms": 0,
    }  # fmt: skip
    assert targets.hits_of(urls) == [1] * 30
    runs = WarmRuns(engine).for_key("deploy:web:v1")
    assert [(r.warmer, r.targets_ok, r.environment) for r in runs] == [("http", 30, "prod")]
    assert runs[0].p50_ms is not None and runs[0].p95_ms is not None


@pytest.mark.clock(datetime(2020, 6, 1, 12, 0, tzinfo=UTC))
def test_a_warm_run_is_recorded_at_the_services_clock(
    settings: Settings, engine: Engine, targets: TargetServer, clock: Clock
) -> None:
    runner = dispatcher(settings, engine, clock, warm_targets=tuple(targets.urls("ok", 2)))
    assert runner.dispatch(deploy("web", "v1")).kind == "done"
    assert [run.started_at for run in WarmRuns(engine).for_key("deploy:web:v1")] == [clock()]


def test_a_new_release_warms_again(
    settings: Settings, engine: Engine, targets: TargetServer
) -> None:
    urls = targets.urls("ok", 5)
    runner = dispatcher(settings, engine, warm_targets=tuple(urls))
    for release in ("v1", "v2"):
        assert runner.dispatch(deploy("web", release)).kind == "done"
    assert targets.hits_of(urls) == [2] * 5


def test_concurrent_duplicates_warm_once(
    settings: Settings, engine: Engine, targets: TargetServer
) -> None:
    """Hammer: 12 threads deliver the same release at once (new messageIds, like GCS/CI)."""
    targets.delay = 0.05
    urls = targets.urls("ok", 20)
    runner = dispatcher(settings, engine, warm_targets=tuple(urls), warm_concurrency=4)
    kinds: list[str] = []
    barrier = threading.Barrier(12)

    def deliver() -> None:
        barrier.wait()
        kinds.append(runner.dispatch(deploy("web", "v9")).kind)

    threads = [threading.Thread(target=deliver) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert kinds.count("done") == 1 and set(kinds) <= {"done", "in-progress", "duplicate"}
    assert targets.hits_of(urls) == [1] * 20
    assert len(WarmRuns(engine).for_key("deploy:web:v9")) == 1


def test_user_warmers_run_are_filtered_by_service_and_a_failure_is_recorded(
    settings: Settings, engine: Engine
) -> None:
    runner = dispatcher(settings, engine, plugins=("tests.deploy.plugin",))
    outcome = runner.dispatch(deploy("web", "v1"))
    assert outcome.kind == "done"
    summaries = {s["warmer"]: s for s in outcome.details["warmers"]}
    assert set(summaries) == {"search", "broken"}  # http has no targets, idle had nothing to do
    assert (summaries["search"]["ok"], summaries["search"]["failed"]) == (3, 1)
    assert summaries["broken"]["failed"] == 1
    runs = {r.warmer: r for r in WarmRuns(engine).for_key("deploy:web:v1")}
    assert "cache cluster is down" in runs["broken"].failures[0]["error"]
    assert (runs["search"].p50_ms, runs["search"].p95_ms) == (2.0, 4.0)
    other = runner.dispatch(deploy("api", "v1"))
    assert [s["warmer"] for s in other.details["warmers"]] == ["broken"]
    assert sorted(plugin.calls) == sorted(
        [("search", "deploy:web:v1"), ("broken", "deploy:web:v1"), ("idle", "deploy:web:v1"),
         ("broken", "deploy:api:v1"), ("idle", "deploy:api:v1")]
    )  # fmt: skip


def test_nothing_to_warm_is_recorded_skipped(settings: Settings, engine: Engine) -> None:
    outcome = dispatcher(settings, engine).dispatch(deploy("web", "v1"))
    assert outcome.kind == "skipped" and "no cache warmer" in outcome.details["reason"]
    row = Inbox(engine).get("deploy:web:v1")
    assert row is not None and row.status is Status.SKIPPED


def test_a_deploy_in_the_attributes_only_is_warmed(
    settings: Settings, engine: Engine, targets: TargetServer
) -> None:
    url = targets.urls("ok", 1)
    runner = dispatcher(settings, engine, warm_targets=tuple(url))
    message = wrapped_body(attributes={"event": "deploy", "service": "web", "version": "7"})
    outcome = runner.dispatch(parse_wrapped(message, Limits()))
    assert (outcome.kind, outcome.key, targets.hits_of(url)) == ("done", "deploy:web:7", [1])


def test_warmers_live_in_the_registry_whatever_the_deploy_handler() -> None:
    """Replacing the deploy handler no longer cuts plugins off from adding warmers."""
    registry = build_registry(Settings(local_mode=True))
    registry.deploy(lambda context, event: None, replace=True)
    plugin.register(registry)
    assert warmers_of(registry) is registry.warmers
    assert list(registry.warmers) == ["http", "search", "broken", "idle"]
