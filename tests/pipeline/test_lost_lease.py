"""A lost lease is acknowledged only when that loses nothing: the row is finished, or another
message that Pub/Sub redelivers holds it. A copy of the *same* message (a balancer's retry, a push
after the ack deadline) that took the claim over and then died must not make the first delivery
ack the message: nothing would ever deliver the key again, and the row would stay ``running``.

Deterministic, on PostgreSQL: the first delivery's handler waits on an event, the clock moves
past its lease by hand (its heartbeat is too slow to renew it), and the copy's claim is made
directly, as a copy that died right after claiming leaves it."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from consumer.config.settings import Settings
from consumer.inbox.model import Status
from consumer.inbox.store import Inbox
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.heartbeat import Heartbeats
from consumer.pipeline.registry import Registry
from consumer.wire.envelope import Limits, parse_wrapped
from consumer.wire.envelopes_out import deploy_body
from consumer.wire.events import DeployEvent
from consumer.wire.outcomes import Kind, Outcome
from tests.conftest import Clock

pytestmark = pytest.mark.postgres
LEASE = timedelta(seconds=Settings().lease_seconds)


class Handler:
    """Counts its runs; the first waits for ``release``, then renews its lease if asked."""

    def __init__(self, heartbeat: bool) -> None:
        self.runs, self.heartbeat = 0, heartbeat
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self, context: HandlerContext, event: Any) -> dict[str, int]:
        self.runs += 1
        if self.runs == 1:
            self.entered.set()
            assert self.release.wait(30)
            if self.heartbeat:
                context.heartbeat()  # raises LeaseLost: the copy holds the claim
        return {"run": self.runs}


def release(message_id: str) -> DeployEvent:
    """One deploy event (one key) delivered as the message ``message_id``."""
    message = parse_wrapped(deploy_body("web", "v1", message_id=message_id), Limits())
    return DeployEvent(service="web", release="v1", message=message)


def dispatcher(engine: Engine, handler: Handler, clock: Clock) -> Dispatcher:
    registry = Registry()
    registry.deploy(handler)
    settings = Settings.of(database_url=engine.url.render_as_string(False), local_mode=True)
    built = Dispatcher(settings, engine, registry, clock=clock)
    built.heartbeats = Heartbeats(every=3600)  # a frozen pod's: the lease lapses
    return built


def overtaken(engine: Engine, handler: Handler, clock: Clock, copy: DeployEvent) -> Outcome:
    """The first delivery of ``release("m-1")``, whose claim ``copy`` takes over while its
    handler runs and never finishes (it died)."""
    first = dispatcher(engine, handler, clock)
    with ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(first.handle, release("m-1"))
        assert handler.entered.wait(10)
        clock.advance(LEASE.total_seconds() + 1)
        taken = Inbox(engine).claim(copy.key, copy.route, copy.message, clock(), LEASE)
        assert taken is not None
        handler.release.set()
        return running.result(timeout=30)


@pytest.mark.parametrize("heartbeat", [False, True], ids=["finish finds it", "heartbeat finds it"])
def test_a_lease_lost_to_a_copy_of_the_same_message_is_not_acknowledged(
    pg_engine: Engine, clock: Clock, heartbeat: bool
) -> None:
    handler = Handler(heartbeat)
    outcome = overtaken(pg_engine, handler, clock, copy=release("m-1"))
    assert (outcome.kind, outcome.http_status, outcome.acked) == (Kind.LEASE_LOST, 409, False)
    row = Inbox(pg_engine).get(release("m-1").key)
    assert row is not None and row.status is Status.RUNNING  # the dead copy's claim
    # Pub/Sub redelivers the nacked message: once the copy's lease lapses, it finishes once.
    clock.advance(LEASE.total_seconds() + 1)
    redelivery = dispatcher(pg_engine, handler, clock)
    assert redelivery.handle(release("m-1")).kind is Kind.DONE
    assert redelivery.handle(release("m-1")).kind is Kind.DUPLICATE
    finished = Inbox(pg_engine).get(release("m-1").key)
    assert finished is not None and finished.status is Status.DONE
    assert handler.runs == 2


def test_a_lease_lost_to_another_message_that_is_redelivered_is_acknowledged(
    pg_engine: Engine, clock: Clock
) -> None:
    outcome = overtaken(pg_engine, Handler(False), clock, copy=release("m-2"))
    assert (outcome.kind, outcome.http_status, outcome.acked) == (Kind.LEASE_LOST, 200, True)


def test_a_lease_lost_to_a_copy_that_finished_is_acknowledged(
    pg_engine: Engine, clock: Clock
) -> None:
    handler = Handler(False)
    first = dispatcher(pg_engine, handler, clock)
    copy = release("m-1")
    with ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(first.handle, release("m-1"))
        assert handler.entered.wait(10)
        clock.advance(LEASE.total_seconds() + 1)
        claim = Inbox(pg_engine).claim(copy.key, copy.route, copy.message, clock(), LEASE)
        assert claim is not None
        assert Inbox(pg_engine).finish(claim, Status.DONE, clock())
        handler.release.set()
        outcome = running.result(timeout=30)
    assert (outcome.kind, outcome.acked) == (Kind.LEASE_LOST, True)


@pytest.mark.parametrize(("message_id", "acked"), [("m-1", False), ("m-2", True)])
def test_a_key_running_under_a_copy_is_nacked_and_under_another_message_acked(
    pg_engine: Engine, clock: Clock, message_id: str, acked: bool
) -> None:
    running = release("m-1")
    assert Inbox(pg_engine).claim(running.key, running.route, running.message, clock(), LEASE)
    outcome = dispatcher(pg_engine, Handler(False), clock).handle(release(message_id))
    assert (outcome.kind, outcome.acked) == (Kind.IN_PROGRESS, acked)
