"""``0016_jobs_epochs`` beside its live run (tests/jobs/test_live_epochs.py): it fails cleanly
behind a lock its swap cannot get and runs again, rebuilding an index an interrupted build left
invalid; it goes down to one plain table and up again with the rows kept; and a fresh install
gets both partitions, the triggers and a working ``consumer_enqueue``."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest
from alembic import command
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError, OperationalError

from bench.support.postgres import conninfo_of, migrated_postgres_database
from bench.support.serving import wait_until
from consumer.db.engine import make_engine, sqlstate
from consumer.db.migrate import alembic_config, upgrade
from consumer.jobs import epochs
from consumer.jobs.model import Debounce, NewJob
from consumer.jobs.store import JobStore, enqueue_many
from consumer.wire.timeutil import utcnow
from tests.jobs.test_live_epochs import (
    BEFORE,
    KIND,
    KIND_ROW,
    SQL_ENQUEUE,
    index_count,
)

pytestmark = pytest.mark.postgres

RELKIND = text("SELECT relkind FROM pg_class WHERE oid = 'jobs'::regclass")
REVISION = text("SELECT version_num FROM alembic_version")
ROWS = text("SELECT id, idempotency_key FROM jobs ORDER BY id")
PARTITIONS = text(
    "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'jobs'::regclass"
)
TRIGGERS = text(
    "SELECT tgname FROM pg_trigger WHERE tgrelid = 'jobs'::regclass AND NOT tgisinternal"
)
WAITING = (
    "SELECT count(*) FROM pg_locks WHERE relation = 'jobs'::regclass AND mode = %s AND NOT granted"
)
COPIED = (
    "kind, payload, status, priority, run_at, attempts, created_at, updated_at, idempotency_key"
)
INVALID = "SELECT indexrelid::regclass::text FROM pg_index WHERE NOT indisvalid"


def keyed_jobs(engine: Engine, prefix: str, count: int = 40) -> None:
    with engine.begin() as connection:
        if not connection.execute(text("SELECT 1 FROM job_kinds")).first():
            connection.execute(text(KIND_ROW), {"kind": KIND})
        jobs = [NewJob(KIND, {}, f"{prefix}-{n}") for n in range(count)]
        for start in range(0, count, 20):  # 0015 knows no consumer_job_epoch(): no COPY
            enqueue_many(connection, jobs[start : start + 20], kinds=[KIND])


def refused(engine: Engine, key: str) -> bool:
    """Whether the key's re-enqueue is refused, by Python and by SQL alike."""
    first = JobStore(engine).enqueue(NewJob(KIND, {}, key), kinds=[KIND])
    with engine.begin() as connection:
        again = connection.execute(SQL_ENQUEUE, {"kind": KIND, "key": key}).scalar_one()
    return not first.inserted and again == first.job_id


def test_a_held_lock_fails_the_swap_and_the_migration_runs_again(postgres_admin: str) -> None:
    """A writer's open transaction holds step 1 off; a reader's ``LOCK`` queued behind step 1's
    request is granted when step 1 commits, so it is held through step 2 (which must not wait
    for it) and step 3 (which must give up after its ``lock_timeout``, changing nothing)."""
    with migrated_postgres_database(postgres_admin, revision=BEFORE) as url:
        held_lock_then_again(url)


def held_lock_then_again(at_0015: str) -> None:
    engine, conninfo = make_engine(at_0015), conninfo_of(at_0015)
    keyed_jobs(engine, "before")
    with (
        psycopg.connect(conninfo, autocommit=True) as admin,
        psycopg.connect(conninfo) as writer,
        psycopg.connect(conninfo) as holder,
    ):
        writer.execute("UPDATE jobs SET priority = 0 WHERE id = 1")  # holds off step 1
        failures: list[Exception] = []
        migration = threading.Thread(target=lambda: failures.extend(attempt(at_0015)))
        migration.start()
        waiting = lambda mode: admin.execute(WAITING, [mode]).fetchone() == (1,)  # noqa: E731
        wait_until(lambda: waiting("AccessExclusiveLock"), timeout=5, every=0.01)
        lock = threading.Thread(target=holder.execute, args=["LOCK jobs IN ACCESS SHARE MODE"])
        lock.start()  # queued behind step 1: granted once it commits, held across step 3's try
        wait_until(lambda: waiting("AccessShareLock"), timeout=5, every=0.01)
        writer.rollback()
        lock.join(timeout=10)
        migration.join(timeout=30)
        try:
            assert not migration.is_alive(), "the migration waits for the lock without a timeout"
        finally:
            holder.rollback()
            migration.join(timeout=30)
        [failure] = failures
        assert isinstance(failure, OperationalError) and sqlstate(failure) == "55P03", failure
        with engine.connect() as connection:
            assert connection.execute(REVISION).scalar_one() == BEFORE
            assert connection.execute(RELKIND).scalar_one() == "r"
        keyed_jobs(engine, "between")  # still usable at 0015: every producer
        assert refused(engine, "before-1") and refused(engine, "between-1")
        debounce = NewJob(KIND, {}, debounce=Debounce("d", 60, 60))
        first = JobStore(engine).enqueue(debounce, kinds=[KIND])
        assert JobStore(engine).enqueue(debounce, kinds=[KIND]).job_id == first.job_id
        admin.execute("DROP INDEX jobs_e0_ids")
        with pytest.raises(psycopg.errors.UniqueViolation):  # interrupted: left invalid
            admin.execute("CREATE UNIQUE INDEX CONCURRENTLY jobs_e0_ids ON jobs ((true))")

    engine.dispose()
    upgrade(at_0015)
    with psycopg.connect(conninfo) as catalog:
        assert catalog.execute(INVALID).fetchall() == []
        rebuilt = "SELECT indexdef FROM pg_indexes WHERE indexname = 'jobs_e0_ids'"
        assert "(id, epoch)" in catalog.execute(rebuilt).fetchone()[0]  # type: ignore[index]
    assert index_count(engine, "jobs_e0") == index_count(engine, "jobs")
    assert refused(engine, "before-2") and refused(engine, "between-2")
    engine.dispose()


def attempt(url: str) -> list[Exception]:
    try:
        upgrade(url)
    except Exception as exc:
        return [exc]
    return []


def test_down_to_one_table_and_up_again_keeps_the_rows(postgres_url: str) -> None:
    engine = make_engine(postgres_url)
    keyed_jobs(engine, "first")
    assert epochs.make_next(engine) == "jobs_e1"
    assert epochs.switch(engine, utcnow(), timedelta(0)) == 1
    keyed_jobs(engine, "second")  # in jobs_e1
    with engine.connect() as connection:
        rows = connection.execute(ROWS).all()
    engine.dispose()

    command.downgrade(alembic_config(postgres_url), BEFORE)
    with engine.connect() as connection:
        assert connection.execute(RELKIND).scalar_one() == "r"
        assert connection.execute(ROWS).all() == rows
    assert refused(engine, "first-1") and refused(engine, "second-1")
    with engine.begin() as connection:
        made = connection.execute(SQL_ENQUEUE, {"kind": KIND, "key": "third"}).scalar_one()
    assert made > rows[-1].id  # the sequence goes on
    for copied, index in ((f"id, {COPIED}", "jobs_pkey"), (COPIED, "jobs_idempotency_key")):
        with pytest.raises(IntegrityError) as twice, engine.begin() as connection:
            again = f"INSERT INTO jobs ({copied}) SELECT {copied} FROM jobs WHERE id = :id"
            connection.execute(text(again), {"id": made})
        assert twice.value.orig.diag.constraint_name == index  # type: ignore[union-attr]
    engine.dispose()

    upgrade(postgres_url)
    with engine.connect() as connection:
        assert connection.execute(RELKIND).scalar_one() == "p"
        assert connection.execute(ROWS).all()[:-1] == rows
        assert sorted(connection.execute(PARTITIONS).scalars()) == ["jobs_e0", "jobs_e1"]
    assert refused(engine, "first-2") and refused(engine, "third")
    engine.dispose()


def test_a_fresh_install_gets_both_partitions_and_the_triggers(pg_engine: Engine) -> None:
    with pg_engine.begin() as connection:
        assert sorted(connection.execute(PARTITIONS).scalars()) == ["jobs_e0", "jobs_e1"]
        assert sorted(connection.execute(TRIGGERS).scalars()) == [
            "jobs_earlier_epochs", "jobs_group_turn", "jobs_notify_due",
        ]  # fmt: skip
        connection.execute(text(KIND_ROW), {"kind": KIND})
        made = connection.execute(SQL_ENQUEUE, {"kind": KIND, "key": "fresh"}).scalar_one()
        where = "SELECT tableoid::regclass::text FROM jobs WHERE id = :id"
        assert connection.execute(text(where), {"id": made}).scalar_one() == "jobs_e0"
    assert epochs.make_next(pg_engine) == "jobs_e1"
    assert epochs.switch(pg_engine, utcnow(), timedelta(0)) == 1
    assert refused(pg_engine, "fresh")  # the trigger finds it in jobs_e0
    with pg_engine.begin() as connection:
        newer = connection.execute(SQL_ENQUEUE, {"kind": KIND, "key": "newer"}).scalar_one()
        assert connection.execute(text(where), {"id": newer}).scalar_one() == "jobs_e1"
