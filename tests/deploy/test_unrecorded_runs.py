"""Recording a warm run must not make a release warm twice. Text the ``warm_runs`` columns cannot
hold (an event built through the Python API, never checked by the classifier) is made storable;
any other failure to record (the table gone, the database down) is noted in the result and the
event still finishes done, so a redelivery is a duplicate and does not warm the caches again."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text

from bench.support.deploy_targets import TargetServer
from consumer.config.settings import Settings
from consumer.deploy.store import WarmRuns
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.wire.envelope import Limits, parse_wrapped
from consumer.wire.envelopes_out import deploy_body
from consumer.wire.events import DeployEvent


def runner(settings: Settings, engine: Engine, urls: list[str]) -> Dispatcher:
    config = Settings.of(
        database_url=settings.database_url, local_mode=True, warm_targets=tuple(urls)
    )
    return Dispatcher(config, engine, build_registry(config))


def release(environment: str = "") -> DeployEvent:
    message = parse_wrapped(deploy_body("web", "v1"), Limits())
    return DeployEvent(service="web", release="v1", message=message, environment=environment)


@pytest.mark.parametrize(
    ("environment", "stored"),
    [("e" * 300, "e" * 200), ("a\ud800b", "a\\ud800b"), ("a\x00b", "a\\x00b")],
    ids=["over the column", "lone surrogate", "nul"],
)
def test_an_unstorable_environment_is_recorded_escaped_and_warmed_once(
    settings: Settings, engine: Engine, targets: TargetServer, environment: str, stored: str
) -> None:
    urls = targets.urls("ok", 3)
    dispatcher = runner(settings, engine, urls)
    first = dispatcher.handle(release(environment=environment))
    assert first.kind == "done", first.details
    assert dispatcher.handle(release(environment=environment)).kind == "duplicate"
    assert targets.hits_of(urls) == [1] * 3
    assert [run.environment for run in WarmRuns(engine).for_key("deploy:web:v1")] == [stored]


def test_a_run_that_cannot_be_recorded_is_done_with_a_note_and_not_warmed_again(
    settings: Settings, engine: Engine, targets: TargetServer
) -> None:
    """The table is dropped under the handler: PostgreSQL reports a ProgrammingError, SQLite an
    OperationalError (which the engine counts as an outage): both paths finish done."""
    urls = targets.urls("ok", 3)
    dispatcher = runner(settings, engine, urls)
    with engine.begin() as connection:
        connection.execute(text("DROP TABLE warm_runs"))
    first = dispatcher.handle(release())
    assert first.kind == "done", first.details
    assert "run not recorded" in first.details["warmers"][0]["note"]
    assert "DROP" not in str(first.details) and "INSERT" not in str(first.details)
    assert dispatcher.handle(release()).kind == "duplicate"
    assert targets.hits_of(urls) == [1] * 3
