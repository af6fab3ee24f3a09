"""Every claim ends at its delivery's deadline: a handler that never returns is not renewed past
the ack deadline, so its lease lapses and the redelivery Pub/Sub makes by then takes the row over
(before, only the process's death ended the renewals, and every redelivery answered 409)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.inbox.store import Inbox
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.heartbeat import Heartbeats
from consumer.pipeline.registry import Registry
from consumer.wire.envelope import Limits, parse_wrapped
from consumer.wire.envelopes_out import deploy_body
from consumer.wire.events import DeployEvent
from consumer.wire.outcomes import Kind
from consumer.wire.timeutil import utcnow

pytestmark = pytest.mark.postgres
LEASE_SECONDS = 2
LEFT_SECONDS = 0.5
"""How long the delivery under test has left before its ack deadline when it starts."""


def test_a_handler_that_never_returns_loses_its_lease_after_the_deadline(
    pg_engine: Engine,
) -> None:
    stuck, entered = threading.Event(), threading.Event()

    def handler(context: HandlerContext, event: DeployEvent) -> None:
        entered.set()
        stuck.wait(30)

    registry = Registry()
    registry.deploy(handler)
    url = pg_engine.url.render_as_string(False)
    settings = Settings.of(database_url=url, local_mode=True, inbox_lease_seconds=LEASE_SECONDS)
    dispatcher = Dispatcher(settings, pg_engine, registry)
    dispatcher.heartbeats = Heartbeats(every=0.2, tick=0.05)
    message = parse_wrapped(deploy_body("web", "v1", message_id="m-1"), Limits())
    event = DeployEvent(service="web", release="v1", message=message)
    began = time.monotonic() - settings.inbox.ack_deadline_seconds + LEFT_SECONDS
    lease, inbox = timedelta(seconds=LEASE_SECONDS), Inbox(pg_engine)
    with ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(dispatcher.handle, event, started=began)
        assert entered.wait(10)
        time.sleep(LEFT_SECONDS + LEASE_SECONDS + 0.5)  # renewed till the deadline, then lapsed
        redelivery = inbox.claim(event.key, event.route, message, utcnow(), lease)
        stuck.set()
        outcome = running.result(timeout=30)
    assert redelivery is not None, "the lease of a handler past its deadline was still renewed"
    assert (outcome.kind, outcome.acked) == (Kind.LEASE_LOST, False)
