"""A handler that raises ``LeaseLost`` while its delivery's claim still holds the row: what was
taken over is the handler's own resource (a later run owns the file), so the row is recorded
``skipped`` and acknowledged, in a one-commit delivery too. Before, the answer was ``lease-lost``
and the row stayed ``running`` for ever (two-commit), or the claim was rolled back with the
message acknowledged (one-commit). A handler whose renewal is refused past its delivery's
deadline is recorded failed, for the redelivery."""

from __future__ import annotations

import time
from typing import Any

import pytest
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.errors import LeaseLost
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.registry import Registry
from consumer.wire.envelope import Limits, parse_wrapped
from consumer.wire.envelopes_out import deploy_body
from consumer.wire.events import DeployEvent
from consumer.wire.outcomes import Kind


def release() -> DeployEvent:
    message = parse_wrapped(deploy_body("web", "v1"), Limits())
    return DeployEvent(service="web", release="v1", message=message)


def dispatcher(engine: Engine, handler: Any, one_commit: bool = False) -> Dispatcher:
    registry = Registry()
    registry.deploy(handler, local_effects=one_commit)
    settings = Settings.of(database_url=engine.url.render_as_string(False), local_mode=True)
    return Dispatcher(settings, engine, registry)


def taken(context: HandlerContext, event: DeployEvent) -> None:
    raise LeaseLost("a newer run owns the file")


@pytest.mark.parametrize("one_commit", [False, True], ids=["two-commit", "one-commit"])
def test_a_resource_taken_over_is_recorded_skipped(engine: Engine, one_commit: bool) -> None:
    outcome = dispatcher(engine, taken, one_commit).handle(release())
    assert (outcome.kind, outcome.http_status) == (Kind.SKIPPED, 200)
    assert "a newer run owns the file" in outcome.details["reason"]
    row = Inbox(engine).get(release().key)
    assert row is not None and row.status is Status.SKIPPED


def test_a_renewal_past_the_deadline_is_recorded_failed(engine: Engine) -> None:
    def renewing(context: HandlerContext, event: DeployEvent) -> None:
        time.sleep(0.3)  # past the deadline, a handler's own heartbeat is refused
        context.heartbeat()

    built = dispatcher(engine, renewing)
    started = time.monotonic() - built.settings.inbox.ack_deadline_seconds + 0.2
    outcome = built.handle(release(), started=started)
    assert (outcome.kind, outcome.http_status) == (Kind.RETRY, 503)
    assert "deadline passed" in outcome.details["error"]
    row = Inbox(engine).get(release().key)
    assert row is not None and row.status is Status.FAILED
