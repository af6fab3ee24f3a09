"""The dispatcher's kept connections (consumer.db.pinned) on real PostgreSQL: one per thread,
in autocommit, across deliveries; no more than the limit; replaced after a fault; closed when
their thread ends or their owner is collected. Backends are read from pg_stat_activity."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import Engine, text

from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.db.pinned import PinnedConnections
from consumer.jobs.store import enqueue
from consumer.pipeline.decision_log import Source
from consumer.pipeline.dispatch import Dispatcher
from consumer.pipeline.registry import Registry
from consumer.wire.events import DeployEvent
from tests.db.test_dead_connections import end_other_backends
from tests.wire.test_keys import deploy

pytestmark = pytest.mark.postgres
SETTLE_SECONDS = 5.0
BACKENDS = """
    SELECT count(*) FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid()
"""


@pytest.fixture
def pg_engine(postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_url, pool_size=3)
    yield engine
    engine.dispose()


def backends(postgres_url: str, expected: int | None = None) -> int:
    """Sessions on the test database besides the one counting. With ``expected``, counted again
    for up to ``SETTLE_SECONDS`` while more are listed: a server process ends a moment after its
    client closed the connection, and until then it is still listed (seen on a loaded CI)."""
    conninfo = postgres_url.replace("postgresql+psycopg://", "postgresql://", 1)
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        with psycopg.connect(conninfo, autocommit=True) as connection:
            row = connection.execute(BACKENDS).fetchone()
        count = int(row[0]) if row else 0
        if expected is None or count <= expected or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


def backend_of(pinned: PinnedConnections) -> tuple[int, bool]:
    """The server pid of this thread's connection, and whether it autocommits."""
    with pinned.connection() as connection:
        pid = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
        driver = connection.connection.dbapi_connection
        return int(pid), bool(getattr(driver, "autocommit", False))


def in_thread(pinned: PinnedConnections) -> None:
    """``backend_of(pinned)`` in a thread that then ends."""
    thread = threading.Thread(target=backend_of, args=(pinned,))
    thread.start()
    thread.join()


def test_a_thread_keeps_one_autocommit_connection_across_deliveries(pg_engine: Engine) -> None:
    pinned = PinnedConnections(pg_engine)
    first, autocommit = backend_of(pinned)
    assert autocommit
    assert [backend_of(pinned) for _ in range(5)] == [(first, True)] * 5
    assert pinned.kept() == 1


def test_threads_over_the_limit_check_one_out_per_delivery(
    pg_engine: Engine, postgres_url: str
) -> None:
    pinned = PinnedConnections(pg_engine)
    assert pinned.limit == 2  # a pool of 3: one base connection stays free
    release, ready, seen = threading.Event(), threading.Barrier(4), []

    def deliver() -> None:
        with pinned.connection() as connection:
            seen.append(connection.connection.dbapi_connection.autocommit)
            ready.wait()
            release.wait()

    threads = [threading.Thread(target=deliver) for _ in range(3)]
    for thread in threads:
        thread.start()
    ready.wait()  # three deliveries at once, each holding its connection
    assert pinned.kept() == 2
    release.set()
    for thread in threads:
        thread.join()
    assert seen == [True, True, True]  # the one over the limit autocommits too
    assert pg_engine.pool.checkedout() == 2  # its connection went back; the kept ones did not


def test_a_fault_drops_the_connection_and_the_next_delivery_keeps_a_new_one(
    pg_engine: Engine, postgres_url: str
) -> None:
    pinned = PinnedConnections(pg_engine)
    first, _ = backend_of(pinned)
    with pytest.raises(RuntimeError), pinned.connection():
        raise RuntimeError("a fault while the connection is in use")
    second, autocommit = backend_of(pinned)
    assert second != first and autocommit
    assert pinned.kept() == 1 and backends(postgres_url, 1) == 1


def test_a_connection_the_server_ended_gets_autocommit_back_after_reconnecting(
    pg_engine: Engine, postgres_url: str
) -> None:
    registry = Registry()
    registry.deploy(lambda context, event: {"warmed": event.release}, replace=True)
    settings = Settings(database_url=postgres_url, local_mode=True)
    service = Dispatcher(settings, pg_engine, registry)
    assert service.handle(deploy("shop", "r1"), Source.PUSH).kind == "done"
    assert end_other_backends(postgres_url) == 1  # the kept connection
    for release in ("r2", "r3"):
        assert service.handle(deploy("shop", release), Source.PUSH).kind == "done"
    assert service._pinned is not None
    _, autocommit = backend_of(service._pinned)
    assert autocommit


def test_the_connection_of_a_thread_that_ended_is_closed_by_the_next_to_keep_one(
    pg_engine: Engine, postgres_url: str
) -> None:
    pinned = PinnedConnections(pg_engine)
    in_thread(pinned)
    assert pinned.kept() == 1 and backends(postgres_url, 1) == 1
    backend_of(pinned)  # this thread keeps one: the ended thread's is closed
    assert pinned.kept() == 1 and backends(postgres_url, 1) == 1
    in_thread(pinned)
    assert pinned.kept() == 2 and backends(postgres_url, 2) == 2
    in_thread(pinned)  # replaces the one of the thread before
    assert pinned.kept() == 2 and backends(postgres_url, 2) == 2


def test_collecting_the_owner_closes_its_connections(postgres_url: str) -> None:
    engine = make_engine(postgres_url)
    try:
        pinned = PinnedConnections(engine)
        backend_of(pinned)
        in_thread(pinned)
        assert backends(postgres_url, 2) == 2
        del pinned
        gc.collect()
        assert backends(postgres_url, 0) == 0
    finally:
        engine.dispose()


def test_dispatchers_on_one_engine_share_its_kept_connections(
    pg_engine: Engine, postgres_url: str
) -> None:
    registry = Registry()
    registry.deploy(lambda context, event: {"warmed": event.release}, replace=True)
    settings = Settings(database_url=postgres_url, local_mode=True)
    services = [Dispatcher(settings, pg_engine, registry) for _ in range(4)]
    for number, service in enumerate(services):
        assert service.handle(deploy("shop", f"r{number}"), Source.PUSH).kind == "done"
    assert PinnedConnections.of(pg_engine).kept() == 1
    assert backends(postgres_url, 1) == 1


def test_eight_threads_delivering_the_same_events_take_effect_once(
    pg_engine: Engine, postgres_url: str
) -> None:
    """More threads than the limit (2 keep a connection, 6 check one out per delivery), every
    event delivered by every thread at once: each handler runs once, and afterwards only the
    kept connections are out of the pool."""
    runs: list[str] = []
    lock = threading.Lock()

    def handler(context: object, event: DeployEvent) -> dict[str, str]:
        with lock:
            runs.append(event.release)
        return {"warmed": event.release}

    registry = Registry()
    registry.deploy(handler, replace=True)
    service = Dispatcher(Settings(database_url=postgres_url, local_mode=True), pg_engine, registry)
    releases = [f"r{number}" for number in range(25)]
    start, kinds = threading.Barrier(8), []

    def deliver_all() -> None:
        start.wait()
        for release in releases:
            outcome = service.handle(deploy("shop", release), Source.PUSH)
            with lock:
                kinds.append(outcome.kind.value)

    threads = [threading.Thread(target=deliver_all) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(runs) == sorted(releases)
    assert len(kinds) == 8 * 25 and set(kinds) <= {"done", "duplicate", "in-progress"}
    assert kinds.count("done") == 25
    assert PinnedConnections.of(pg_engine).kept() <= 2
    assert pg_engine.pool.checkedout() == PinnedConnections.of(pg_engine).kept()


def test_a_use_inside_a_one_commit_transaction_gets_a_connection_of_its_own(
    pg_engine: Engine,
) -> None:
    """A one-commit delivery's handler that calls ``enqueue(engine, ...)`` asks this thread's
    kept connection again while the delivery's transaction is open on it: it must get another
    connection, never the same one switched to autocommit under that transaction."""
    pinned = PinnedConnections.of(pg_engine)
    with pinned.transaction() as outer, outer.begin() as transaction:
        outer_pid = outer.execute(text("SELECT pg_backend_pid()")).scalar_one()
        job = enqueue(pg_engine, "email", {"to": "ann@example.com"}, key="pinned/nested")
        assert job.inserted  # committed in its own right, on another connection
        with pinned.connection() as inner:
            assert inner is not outer
            assert inner.execute(text("SELECT pg_backend_pid()")).scalar_one() != outer_pid
        assert outer.in_transaction() and not outer.closed
        outer.execute(text("SELECT 1"))  # the delivery's transaction is intact
        transaction.rollback()
    with pinned.connection() as again:
        assert again.execute(text("SELECT pg_backend_pid()")).scalar_one() == outer_pid
        found = again.execute(
            text("SELECT count(*) FROM jobs WHERE idempotency_key = 'pinned/nested'")
        ).scalar_one()
    assert found == 1  # the outer rollback did not take the job with it
