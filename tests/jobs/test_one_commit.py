"""One-commit handlers (``local_effects=True``), on both databases: the jobs topic's enqueue and a
handler of the ``message`` route commit their claim, effects and outcome in one transaction.
Concurrent copies of one message make one job; a handler that raises after writing leaves no
effect and a failed attempt (a cut or a kill mid-transaction: ``test_one_commit_faults``)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import Any

import pytest
from sqlalchemy import Engine, insert, text
from sqlalchemy.exc import DBAPIError

from consumer.config.settings import Settings
from consumer.errors import Permanent
from consumer.inbox.model import Status
from consumer.jobs.model import NewJob
from consumer.jobs.schema import jobs
from consumer.jobs.store import JobStore
from consumer.pipeline.context import HandlerContext
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.registry import Registry
from consumer.plugins import build_registry
from consumer.wire.events import JobEvent
from consumer.wire.message import PushMessage
from consumer.wire.outcomes import Kind
from consumer.wire.timeutil import utcnow
from tests.jobs.conftest import job_count
from tests.jobs.test_topic import job_message

COPIES = 12


class Broke(Exception):
    """The test's handler failed after writing, on purpose."""


@pytest.fixture
def job_settings(settings: Settings) -> Settings:
    return settings.with_values(plugins=("tests.jobs.kinds_plugin",))


def slowed(registry: Registry, seconds: float) -> None:
    """The jobs topic's handler, still one-commit, holding its transaction ``seconds`` after
    its enqueue: every concurrent copy meets it open."""
    enqueue = registry.routes.get("job")
    assert enqueue is not None

    def slow_enqueue(context: HandlerContext, event: Any) -> Any:
        result = enqueue(context, event)
        time.sleep(seconds)
        return result

    registry.route("job", slow_enqueue, replace=True, local_effects=True)


def test_the_jobs_topic_is_a_one_commit_handler_until_replaced(job_settings: Settings) -> None:
    registry = build_registry(job_settings)
    event = JobEvent("email", job_message("m1"))
    assert registry.one_commit(event)
    registry.route("job", lambda _context, _event: None, replace=True)
    assert not registry.one_commit(event)


@pytest.mark.parametrize("hold", [0.0, 0.3])
def test_concurrent_copies_of_one_message_make_one_job(
    engine: Engine, job_settings: Settings, hold: float
) -> None:
    registry = build_registry(job_settings)
    slowed(registry, hold)
    dispatcher = Dispatcher(job_settings, engine, registry)
    start = threading.Barrier(COPIES)

    def deliver(_: int) -> Any:
        start.wait()
        return dispatcher.dispatch(job_message("m-same", {}, job_kind="record"))

    with ThreadPoolExecutor(COPIES) as pool:
        outcomes = list(pool.map(deliver, range(COPIES)))
    kinds = Counter(outcome.kind.value for outcome in outcomes)
    assert kinds == {"done": 1, "duplicate": COPIES - 1}
    assert job_count(engine) == 1
    row = dispatcher.inbox.get(outcomes[0].key)
    assert row is not None and (row.status, row.attempts) == (Status.DONE, 1)


def recording_handler(fail: list[type[Exception] | None]) -> Callable[..., Any]:
    """A ``message`` handler that enqueues a job through the delivery's transaction, then fails
    with the next exception of ``fail`` (``None``: returns)."""

    def handler(context: HandlerContext, event: Any) -> dict[str, Any]:
        assert context.connection is not None
        job = NewJob("record", {}, key=f"effect:{event.message.message_id}")
        JobStore(context.engine).enqueue(job, kinds=["record"], connection=context.connection)
        error = fail.pop(0)
        if error is not None:
            raise error("after writing")
        return {"written": True}

    return handler


def test_a_handler_that_raises_after_writing_leaves_no_effect_and_a_failed_attempt(
    engine: Engine, settings: Settings
) -> None:
    registry = Registry()
    registry.route("message", recording_handler([Broke, None]), local_effects=True)
    dispatcher = Dispatcher(settings, engine, registry)
    message = PushMessage("m1", utcnow(), data=b"x", subscription="projects/p/subscriptions/s")
    failed = dispatcher.dispatch(message)
    assert (failed.kind, failed.http_status, failed.details["attempt"]) == (Kind.RETRY, 503, 1)
    assert "after writing" in failed.details["error"]
    assert job_count(engine) == 0
    row = dispatcher.inbox.get(failed.key)
    assert row is not None and (row.status, row.attempts) == (Status.FAILED, 1)
    assert row.error is not None and "after writing" in row.error
    done = dispatcher.dispatch(message)
    assert (done.kind, done.details["attempt"], done.details["written"]) == (Kind.DONE, 2, True)
    assert job_count(engine) == 1


def test_a_permanent_failure_after_writing_is_dead_without_its_effect(
    engine: Engine, settings: Settings
) -> None:
    registry = Registry()
    registry.route("message", recording_handler([Permanent]), local_effects=True)
    dispatcher = Dispatcher(settings, engine, registry)
    message = PushMessage("m1", utcnow(), data=b"x", subscription="projects/p/subscriptions/s")
    dead = dispatcher.dispatch(message)
    assert (dead.kind, dead.http_status) == (Kind.DEAD, 200)
    assert job_count(engine) == 0
    row = dispatcher.inbox.get(dead.key)
    assert row is not None and row.status is Status.DEAD
    assert dispatcher.dispatch(message).kind is Kind.DUPLICATE


def test_a_handler_that_swallows_a_database_error_is_a_failed_attempt_not_a_500(
    engine: Engine, settings: Settings
) -> None:
    """The handler writes, then catches the error of a bad statement and returns. PostgreSQL has
    aborted the transaction, so it cannot commit: a failed attempt without the effect, done on
    the redelivery. SQLite undoes only the bad statement: done at once. Either way the effect is
    there exactly when the row is done."""
    calls: list[int] = []

    def handler(context: HandlerContext, event: Any) -> dict[str, Any]:
        assert context.connection is not None
        job = NewJob("record", {}, key=f"effect:{event.message.message_id}")
        JobStore(context.engine).enqueue(job, kinds=["record"], connection=context.connection)
        calls.append(1)
        if len(calls) == 1:
            with suppress(DBAPIError):
                context.connection.execute(text("SELECT * FROM no_such_table"))
        return {"written": True}

    registry = Registry()
    registry.route("message", handler, local_effects=True)
    dispatcher = Dispatcher(settings, engine, registry)
    message = PushMessage("m1", utcnow(), data=b"x", subscription="projects/p/subscriptions/s")
    first = dispatcher.dispatch(message)
    if engine.dialect.name == "postgresql":
        assert (first.kind, first.http_status) == (Kind.RETRY, 503)
        assert "could not commit" in first.details["error"]
        assert job_count(engine) == 0
        row = dispatcher.inbox.get(first.key)
        assert row is not None and (row.status, row.attempts) == (Status.FAILED, 1)
        first = dispatcher.dispatch(message)
    assert (first.kind, first.details["written"]) == (Kind.DONE, True)
    assert job_count(engine) == 1
    assert dispatcher.dispatch(message).kind is Kind.DUPLICATE


def test_a_one_commit_handler_writes_nothing_outside_its_transaction(
    engine: Engine, settings: Settings
) -> None:
    """Until the delivery commits, neither the claim nor the effect is visible elsewhere."""
    seen: list[tuple[int, int]] = []
    registry = Registry()

    def handler(context: HandlerContext, event: Any) -> None:
        assert context.connection is not None
        context.connection.execute(insert(jobs).values(_job_row(event.message.message_id)))
        seen.append((elsewhere(engine, "jobs"), elsewhere(engine, "inbox")))

    registry.route("message", handler, local_effects=True)
    message = PushMessage("m1", utcnow(), data=b"x", subscription="projects/p/subscriptions/s")
    assert Dispatcher(settings, engine, registry).dispatch(message).kind is Kind.DONE
    assert seen == [(0, 0)]
    assert job_count(engine) == 1


def elsewhere(engine: Engine, table: str) -> int:
    """The rows of ``table`` another connection sees, read outside SQLAlchemy's transaction
    block (which on SQLite would wait for the writer's lock)."""
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute(f"SELECT count(*) FROM {table}")
        return int(cursor.fetchone()[0])
    finally:
        raw.close()


def _job_row(key: str) -> dict[str, Any]:
    now = utcnow()
    return {"kind": "record", "payload": {}, "status": "pending", "priority": 0, "run_at": now,
            "attempts": 0, "max_attempts": 3, "idempotency_key": key, "created_at": now,
            "updated_at": now}  # fmt: skip


def test_one_commit_and_two_commit_deliveries_alternate_on_a_thread(
    engine: Engine, settings: Settings
) -> None:
    """The thread's kept connection leaves autocommit for a one-commit delivery and gets it
    back for the next two-commit one: every outcome is committed when it is answered."""
    registry = Registry()
    registry.route("message", recording_handler([None] * 3), local_effects=True)
    registry.deploy(lambda _context, event: {"release": event.release})
    dispatcher = Dispatcher(settings, engine, registry)
    subscription = "projects/p/subscriptions/s"
    for n in range(3):
        message = PushMessage(f"m{n}", utcnow(), data=b"x", subscription=subscription)
        deploy = {"event": "deploy", "service": "s", "release": f"r{n}"}
        one = dispatcher.dispatch(message)
        two = dispatcher.dispatch(PushMessage(f"d{n}", utcnow(), attributes=deploy))
        assert (one.kind, two.kind) == (Kind.DONE, Kind.DONE)
        assert (elsewhere(engine, "inbox"), elsewhere(engine, "jobs")) == (2 * n + 2, n + 1)
