"""NOTIFY on a Python enqueue (``consumer.jobs.notify``): ``enqueue`` and ``enqueue_many`` on
PostgreSQL notify channel ``consumer_jobs`` inside the enqueuing transaction for a job due now,
so a rollback sends nothing and a commit sends one; a later job and a duplicate send none; SQLite
enqueues as before. Then end to end: a Python enqueue starts its job at once on a listening
gunicorn server with no wake-up topic and no tick due."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import Engine

from consumer import NewJob, enqueue, enqueue_many
from consumer.db.engine import make_engine
from consumer.jobs.bulk import BulkBatch, JobTemplate, insert_batch
from consumer.jobs.notify import CHANNEL
from consumer.wire.timeutil import utcnow
from tests.conftest import Rollback, Server
from tests.jobs import stamp_plugin
from tests.jobs.test_sql_enqueue import db, listening, server_env, wait_started  # noqa: F401

pytestmark = pytest.mark.postgres
EMAIL = {"to": "ann@example.com", "text": "hi"}


@pytest.fixture
def heard(postgres_url: str) -> Iterator[Callable[[float], int]]:
    """Notifications on the channel received within a wait, by a connection of the test's."""
    dsn = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"LISTEN {CHANNEL}")

        def count(wait: float) -> int:
            return sum(1 for _ in connection.notifies(timeout=wait))

        yield count


def test_a_committed_enqueue_due_now_notifies_once(
    pg_engine: Engine, heard: Callable[[float], int]
) -> None:
    result = enqueue(pg_engine, "email", EMAIL, key="n-1")
    assert result.inserted
    assert heard(1.0) == 1


def test_a_later_job_and_a_duplicate_notify_nothing(
    pg_engine: Engine, heard: Callable[[float], int]
) -> None:
    enqueue(pg_engine, "email", EMAIL, key="n-2", run_at=utcnow() + timedelta(hours=1))
    assert heard(0.5) == 0
    assert enqueue(pg_engine, "email", EMAIL, key="n-2").duplicate
    assert heard(0.5) == 0


def test_enqueue_many_notifies_on_commit_and_never_on_rollback(
    pg_engine: Engine, heard: Callable[[float], int]
) -> None:
    jobs = [NewJob("email", EMAIL, key=f"many-{n}") for n in range(5)]
    with pytest.raises(Rollback), pg_engine.begin() as connection:
        assert enqueue_many(connection, jobs) == 5
        raise Rollback
    assert heard(0.5) == 0
    with pg_engine.begin() as connection:
        assert enqueue_many(connection, jobs) == 5
        assert heard(0.3) == 0  # not before the commit
    assert heard(1.0) == 1  # one per transaction, however many jobs


def test_any_insert_of_a_due_job_notifies_once_per_statement(
    postgres_url: str, pg_engine: Engine, heard: Callable[[float], int]
) -> None:
    """The table's trigger, not the producer, sends it: a team's own INSERT notifies too, once
    per statement however many rows, and a statement of later jobs only sends none."""
    dsn = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    insert = (
        "INSERT INTO jobs (kind, payload, status, priority, run_at, attempts, idempotency_key, "
        "created_at, updated_at) SELECT 'email', '{}', 'pending', 0, now() + %s::interval, 0, "
        "'raw-' || %s || '-' || n, now(), now() FROM generate_series(1, 3) AS n"
    )
    with psycopg.connect(dsn) as connection:
        connection.execute(insert, ("1 hour", "later"))
        connection.commit()
        assert heard(0.5) == 0
        connection.execute(insert, ("0 seconds", "due"))
        assert heard(0.3) == 0  # not before the commit
        connection.commit()
    assert heard(1.0) == 1


def test_a_file_import_wakes_no_listener_but_a_team_s_insert_after_it_does(
    pg_engine: Engine, heard: Callable[[float], int]
) -> None:
    """An import's batches opt out (``SET LOCAL consumer.notify TO off``): sweeps started by
    each batch would run in the importing processes and starve the import. The setting is the
    transaction's own: the next transaction on the same connection notifies as before."""
    batch = BulkBatch("postgresql")
    for n in range(3):
        batch.add(f"import-{n}", '{"to": "ann@example.com"}')
    with pg_engine.connect() as connection:
        with connection.begin():
            assert insert_batch(connection, JobTemplate("email"), batch) == 3
        assert heard(0.5) == 0
        with connection.begin():
            assert enqueue_many(connection, [NewJob("email", EMAIL, key="after-import")]) == 1
    assert heard(1.0) == 1


def test_sqlite_enqueues_without_notify(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    try:
        assert enqueue(engine, "email", EMAIL, key="s-1").inserted
        with engine.begin() as connection:
            assert enqueue_many(connection, [NewJob("email", EMAIL, key="s-2")]) == 1
    finally:
        engine.dispose()


@pytest.mark.slow
def test_a_python_enqueue_starts_at_once_on_a_listening_server(
    db: Engine,  # noqa: F811
    postgres_url: str,
    tmp_path: Path,
    start_server: Callable[..., Server],
) -> None:
    start_server(server_env(postgres_url, tmp_path), workers=1)
    listening(db, 1)
    for n in range(3):
        result = enqueue(db, stamp_plugin.KIND, {"n": n}, kinds=[stamp_plugin.KIND])
        committed = time.time()
        assert result.job_id is not None
        assert wait_started(db, result.job_id) - committed < 1.0  # no wake topic, no tick
