"""Continuation: a sweep that ran out of budget hands its backlog on as new messages.

The fast tests drive the real dispatcher (inbox included); the slow one goes through Google's
Pub/Sub emulator, which pushes each continuation to a real gunicorn server."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import requests
from sqlalchemy import Engine, select

from consumer import NewJob, enqueue_many
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.jobs import cleanup as cleanup_task
from consumer.jobs.sweep import SweepSummary
from consumer.jobs.tick import continuations_wanted
from consumer.pipeline import continuation as continuation_module
from consumer.pipeline.dispatch import Dispatcher
from consumer.plugins import build_registry
from consumer.ticks.schema import tick_progress
from consumer.wire.envelopes_out import tick_body
from consumer.wire.events import TickEvent
from consumer.wire.message import PushMessage
from consumer.wire.outcomes import Kind
from consumer.wire.schedule import Every
from consumer.wire.timeutil import utcnow
from tests.conftest import Server, settings_env
from tests.jobs import kinds_plugin
from tests.jobs.test_tick import cleanup_context, finished_jobs
from triggers.local import clients, stack

TOPIC = "projects/p/topics/continuations"


def continuation(message_id: str, uuid: str, age_seconds: float = 0) -> PushMessage:
    published = utcnow() - timedelta(seconds=age_seconds)
    attributes = {"task": "sweep", "continuation": uuid}
    return PushMessage(message_id, published, attributes=attributes)


def last_slot(engine: Engine) -> object:
    with engine.connect() as connection:
        return connection.execute(select(tick_progress.c.last_slot)).scalar()


def test_a_continuation_delivered_twice_runs_once_and_never_moves_the_slot(
    runs_engine: Engine, settings: Settings
) -> None:
    registry = build_registry(settings.with_values(plugins=("tests.jobs.kinds_plugin",)))
    dispatcher = Dispatcher(settings, runs_engine, registry)
    assert (
        dispatcher.dispatch(PushMessage("t1", utcnow(), attributes={"task": "sweep"})).kind
        is Kind.DONE
    )
    slot = last_slot(runs_engine)
    with runs_engine.begin() as connection:
        enqueue_many(connection, [NewJob("record", {}) for _ in range(3)], kinds=["record"])
    old = 3 * 3600  # older than any tick slot kept: a tick would be stale, a continuation is not
    first = dispatcher.dispatch(continuation("c1", "u-1", age_seconds=old))
    assert (first.kind, first.key, first.details["done"]) == (
        Kind.DONE,
        "tick:sweep:continuation:u-1",
        3,
    )
    again = dispatcher.dispatch(continuation("c2", "u-1"))  # the same continuation, new id
    assert again.kind is Kind.DUPLICATE
    assert last_slot(runs_engine) == slot
    assert sum(kinds_plugin.run_counts(runs_engine).values()) == 3


@pytest.mark.parametrize(
    ("stopped", "due", "unknown", "from_continuation", "wanted"),
    [
        ("budget", 1000, {}, False, 4),  # ten slices of 100 needed: capped at the fan-out
        ("budget", 150, {}, False, 2),
        ("budget", 1000, {}, True, 1),  # a continuation only carries its own chain on
        ("budget", 30, {"other": 30}, False, 0),  # nothing this service could run
        ("drained", 0, {}, False, 0),
        ("lease", 500, {}, False, 0),
    ],
)
def test_continuations_wanted(
    stopped: str, due: int, unknown: dict[str, int], from_continuation: bool, wanted: int
) -> None:
    settings = Settings.of(local_mode=True, continuation_topic=TOPIC, continuation_fanout=4)
    summary = SweepSummary(done=100, still_due=due, unknown_kinds=unknown, stopped=stopped)
    message = continuation("m", "u") if from_continuation else PushMessage("m", utcnow())
    event = TickEvent("sweep", utcnow(), 300, message, continuation="u" * from_continuation)
    assert continuations_wanted(settings, event, summary) == wanted
    assert continuations_wanted(settings.with_values(continuation_topic=""), event, summary) == 0


@pytest.fixture(scope="module")
def pubsub_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = stack.missing()
    if reason:
        pytest.skip(reason)
    port = stack.free_port()
    log = tmp_path_factory.mktemp("pubsub") / "emulator.log"
    service = stack.start_pubsub(port, log, "p")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        service.stop()


@pytest.mark.slow
@pytest.mark.postgres
def test_a_backlog_drains_through_continuations_pushed_by_the_emulator(
    pubsub_host: str,
    postgres_url: str,
    start_server: Callable[..., Server],
    tmp_path: Path,
) -> None:
    settings = Settings.of(
        database_url=postgres_url, local_mode=True, ack_deadline_seconds=10,
        safety_margin_seconds=7, plugins=("tests.jobs.kinds_plugin",),
    )  # fmt: skip
    engine = kinds_engine(postgres_url)
    with engine.begin() as connection:  # ~0.02 s each: about ten 2 s slices of work
        jobs = [NewJob("record", {"sleep": 0.02}) for _ in range(800)]
        enqueue_many(connection, jobs, allow_unknown=True)  # the server loads the plugin
    env = settings_env(
        settings, CONSUMER_CONTINUATION_TOPIC=TOPIC, PUBSUB_EMULATOR_HOST=pubsub_host,
        CONSUMER_CONTINUATION_FANOUT="3", CONSUMER_SWEEP_BATCH_SIZE="20",
    )  # fmt: skip
    server = start_server(env, workers=3)
    stack.ensure_topic(pubsub_host, "p", "continuations")
    stack.ensure_push_subscription(
        pubsub_host, "p", "continuations-push", "continuations", f"{server.url}/push", 10
    )
    started = time.monotonic()
    first = requests.post(f"{server.url}/push", json=tick_body("sweep"), timeout=30).json()
    assert first["outcome"] == "done" and first["stopped"] == "budget"
    assert first["continuations"] == 3
    while sum(kinds_plugin.run_counts(engine).values()) < 800:
        assert time.monotonic() - started < 60, "the backlog did not drain"
        time.sleep(0.2)
    assert kinds_plugin.run_counts(engine) == {job_id: 1 for job_id in range(1, 801)}
    engine.dispose()


def kinds_engine(url: str) -> Engine:
    engine = make_engine(url)
    kinds_plugin.runs_metadata.create_all(engine)
    return engine


@pytest.mark.slow
def test_a_cleanup_left_with_rows_hands_them_on_through_the_emulator(
    pubsub_host: str, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cleanup whose budget ends with rows past retention publishes one continuation; the
    cleanup it starts purges the rest and publishes none: a day's tick no longer bounds how
    many rows a day can purge."""
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_host)
    monkeypatch.setattr(continuation_module, "_clients", {})  # not a client of another emulator
    monkeypatch.setattr(cleanup_task, "CHUNK_ROWS", 50)
    topic = stack.ensure_topic(pubsub_host, "p", "cleanup-chain")
    subscription = "projects/p/subscriptions/cleanup-chain-pull"
    clients.subscriber(pubsub_host).create_subscription(name=subscription, topic=topic)
    settings = Settings.of(database_url=sqlite_url, local_mode=True, continuation_topic=topic)
    engine = make_engine(sqlite_url)
    finished_jobs(engine, 1000)
    reserve = min(cleanup_task.RESERVE_SECONDS, settings.handler_budget_seconds / 2)
    event = TickEvent("cleanup", utcnow(), Every(86400), PushMessage("t1", utcnow()))

    first = cleanup_task.cleanup(cleanup_context(settings, engine, reserve), event)
    assert first["more"] and first["continuations"] == 1, first
    pulled = clients.subscriber(pubsub_host).pull(subscription=subscription, max_messages=10)
    [message] = [received.message for received in pulled.received_messages]
    assert message.attributes["task"] == "cleanup" and message.attributes["continuation"]

    chained = PushMessage("c1", utcnow(), attributes=dict(message.attributes))
    dispatcher = Dispatcher(settings, engine, build_registry(settings))
    rest = dispatcher.dispatch(chained)
    assert rest.kind is Kind.DONE, rest.details
    assert not rest.details["more"] and rest.details["continuations"] == 0
    assert first["jobs_purged"] + rest.details["jobs_purged"] == 1000
    engine.dispose()
