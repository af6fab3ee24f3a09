"""The jobs table is partitioned by epoch on a live database (``0016_jobs_epochs`` applied to a
PostgreSQL database at ``0015_inbox_partitions`` while producers enqueue and sweepers run jobs):
every job runs once, no key gets a second row, the keys recorded before still refuse a
re-enqueue in the next epoch, the old table's indexes are adopted, not built again, and what the
producers and sweepers met during the swap was transient and retried. (Run again after a
failure, down and up, a fresh install: tests/jobs/test_epochs_migration.py.)"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, text

from bench.support.postgres import conninfo_of, migrated_postgres_database
from bench.support.serving import wait_until
from consumer.config.settings import Settings
from consumer.db.engine import make_engine
from consumer.db.migrate import upgrade
from consumer.jobs import epochs
from consumer.jobs.kinds import JobContext
from consumer.jobs.model import Job, NewJob
from consumer.jobs.store import JobStore, enqueue_many
from consumer.jobs.sweep import Sweeper
from consumer.pipeline.extensions import JobKinds
from consumer.wire.timeutil import utcnow

pytestmark = [pytest.mark.postgres, pytest.mark.serial]

BEFORE = "0015_inbox_partitions"
KIND = "noop"
DONE, PENDING, RUNNING, LOCKED, GROUPED, DEBOUNCED = 2000, 300, 100, 100, 100, 50
LIVE_KEYS = 400
"""Each of two keyed producers enqueues every live key, in its own order: two tries a key."""
CHUNK = 20
"""Below ``COPY_FROM``: ``enqueue_many``'s multi-row insert, which needs no 0016 function."""
RUN_SECONDS = 0.003
"""A job takes a moment: some are running, claimed, when the swap comes."""
ADOPTED = ("claimable", "group_turns", "group_head", "leases", "finished", "lock_key_queue")
KIND_ROW = "INSERT INTO job_kinds VALUES (:kind, NULL, 65536, now(), NULL)"
SQL_ENQUEUE = text("SELECT consumer_enqueue(:kind, '{}'::jsonb, :key)")
TRANSIENT = {"40001", "40P01", "55P03", "57014"}
"""What a producer or a sweeper may meet during the swap and retry: a serialization failure, a
deadlock, a lock not granted in time, a statement cancelled (any other fault is a bug)."""


def code_of(exc: BaseException | None) -> str:
    """The SQLSTATE behind ``exc`` (``Unavailable`` wraps the driver's error), or ``-``."""
    while exc is not None:
        code = getattr(exc, "sqlstate", None) or getattr(getattr(exc, "orig", None), "sqlstate", "")
        if code:
            return str(code)
        exc = exc.__cause__ or exc.__context__
    return "-"


class Ledger:
    """What the producers and the sweepers did: effects per job, inserts, retried faults."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.effects: Counter[int] = Counter()
        self.keys: dict[int, str | None] = {}
        self.inserted = 0
        self.faults: list[str] = []
        self.during = Counter[str]()
        self.migrating = threading.Event()
        self.stop = threading.Event()

    def ran(self, context: JobContext, job: Job) -> None:
        time.sleep(RUN_SECONDS)
        with self.lock:
            self.effects[job.id] += 1
            self.keys[job.id] = job.idempotency_key
            self.during["runs"] += self.migrating.is_set()

    def enqueued(self, inserted: int) -> None:
        with self.lock:
            self.inserted += inserted
            self.during["enqueues"] += self.migrating.is_set()

    def retried(self, what: str, write: Callable[..., int], *args: Any) -> None:
        """``write(*args)`` until it goes through; each fault is kept, none is lost."""
        while not self.stop.is_set():
            try:
                self.enqueued(write(*args))
                return
            except Exception as exc:
                self.fault(what, exc)
                time.sleep(0.05)

    def fault(self, what: str, exc: BaseException) -> None:
        with self.lock:
            self.faults.append(f"{what}: {code_of(exc)} {type(exc).__name__}: {str(exc)[:80]}")


def keyed_producer(engine: Engine, keys: list[str], ledger: Ledger) -> None:
    def one(job: NewJob) -> int:
        return int(JobStore(engine).enqueue(job, kinds=[KIND]).inserted)

    for key in keys:
        ledger.retried("enqueue", one, NewJob(KIND, {}, key))
        time.sleep(0.002)


def bulk_producer(engine: Engine, ledger: Ledger) -> None:
    def chunk(n: int) -> int:
        with engine.begin() as connection:
            jobs = [NewJob(KIND, {}, f"bulk-{n}-{i % 15}") for i in range(CHUNK)]  # 5 repeats
            return enqueue_many(connection, jobs, kinds=[KIND])

    for n in range(30):
        ledger.retried("enqueue_many", chunk, n)
        time.sleep(0.02)


def sql_producer(engine: Engine, ledger: Ledger) -> None:
    made: dict[str, int] = {}

    def one(key: str) -> int:
        with engine.begin() as connection:
            job_id = connection.execute(SQL_ENQUEUE, {"kind": KIND, "key": key}).scalar_one()
        new = key not in made  # the second enqueue of a key returns the first one's job
        made[key] = job_id
        return int(new)

    for n in range(300):
        ledger.retried("consumer_enqueue", one, f"sql-{n // 2}")  # each key twice
        time.sleep(0.005)


def sweeper(engine: Engine, url: str, ledger: Ledger) -> None:
    """A pod's sweeps with a no-op kind, each until drained, until told to stop; a sweep that
    fails is recorded and swept again."""
    kinds = JobKinds()
    kinds.add(KIND, ledger.ran)
    settings = Settings.of(database_url=url, local_mode=True, sweep_batch_size=20)
    while not ledger.stop.is_set():
        try:
            Sweeper(settings, engine, kinds).run(time.monotonic() + 10)
        except Exception as exc:
            ledger.fault("sweep", exc)
        time.sleep(0.05)


def seed(engine: Engine) -> None:
    """What 0015's table holds: finished keyed jobs, pending ones (keyed, lock-keyed, grouped,
    debounced) and running ones whose lease runs out soon (their sweeper is gone)."""
    rows = [NewJob(KIND, {}, f"done-{n}") for n in range(DONE)]
    rows += [NewJob(KIND, {}, f"pending-{n}" if n % 2 else None) for n in range(PENDING)]
    rows += [NewJob(KIND, {}, f"running-{n}") for n in range(RUNNING)]
    rows += [NewJob(KIND, {}, lock_key=f"lock-{n % 7}") for n in range(LOCKED)]
    rows += [NewJob(KIND, {}, group=f"tenant-{n % 5}") for n in range(GROUPED)]
    with engine.begin() as connection:
        connection.execute(text(KIND_ROW), {"kind": KIND})
        for start in range(0, len(rows), CHUNK):
            enqueue_many(connection, rows[start : start + CHUNK], kinds=[KIND])
        finish = "UPDATE jobs SET status = 'done', finished_at = now() WHERE idempotency_key LIKE"
        connection.execute(text(f"{finish} 'done-%'"))
        connection.execute(
            text(
                "UPDATE jobs SET status = 'running', attempts = 1, claimed_by = 'gone', "
                "lease_until = now() + interval '2 seconds' WHERE idempotency_key LIKE 'running-%'"
            )
        )
        connection.execute(
            text(
                "INSERT INTO jobs (kind, payload, status, priority, run_at, attempts, created_at, "
                "updated_at, debounce_key, debounce_until) SELECT :kind, '{}', 'pending', 0, "
                "now() + interval '1 second', 0, now(), now(), 'debounce-' || n, "
                "now() + interval '1 minute' FROM generate_series(1, :n) AS n"
            ),
            {"kind": KIND, "n": DEBOUNCED},
        )


def index_oids(connection: psycopg.Connection, names: list[str]) -> list[int]:
    query = "SELECT to_regclass(name)::oid FROM unnest(%s::text[]) WITH ORDINALITY AS t(name, n)"
    return [row[0] for row in connection.execute(f"{query} ORDER BY n", [names])]


def index_count(engine: Engine, table: str) -> int:
    query = text("SELECT count(*) FROM pg_index WHERE indrelid = to_regclass(:table)")
    with engine.connect() as connection:
        return int(connection.execute(query, {"table": table}).scalar_one())


@pytest.fixture
def at_0015(postgres_admin: str) -> Iterator[str]:
    with migrated_postgres_database(postgres_admin, revision=BEFORE) as url:
        yield url


def test_partitioning_live_jobs_runs_each_job_once(at_0015: str) -> None:
    engine = make_engine(at_0015, pool_size=12)
    seed(engine)
    with psycopg.connect(conninfo_of(at_0015)) as catalog:
        old = index_oids(catalog, [f"jobs_{tail}" for tail in ADOPTED])
        recorded = [row[0] for row in catalog.execute("SELECT idempotency_key FROM jobs")]
    ledger = Ledger()
    live = [f"live-{n}" for n in range(LIVE_KEYS)]
    orders = [random.Random(order).sample(live, len(live)) for order in range(2)]
    producers = [thread(keyed_producer, engine, order, ledger) for order in orders]
    producers += [thread(bulk_producer, engine, ledger), thread(sql_producer, engine, ledger)]
    sweepers = [thread(sweeper, engine, at_0015, ledger) for _ in range(3)]
    try:
        wait_until(lambda: ledger.inserted > 200 and sum(ledger.effects.values()) > 200, every=0.01)
        ledger.migrating.set()
        upgrade(at_0015)
        ledger.migrating.clear()
        for producer in producers:
            producer.join(timeout=60)
        wait_until(lambda: unfinished(engine) == 0, timeout=60, every=0.2)
    finally:
        ledger.stop.set()
    for worker in producers + sweepers:
        worker.join(timeout=30)
    assert not any(worker.is_alive() for worker in producers + sweepers)

    with engine.connect() as connection:
        ids = dict(connection.execute(text("SELECT id, idempotency_key FROM jobs")).all())
        finished_before = set(
            connection.execute(text("SELECT id FROM jobs WHERE idempotency_key LIKE 'done-%'"))
            .scalars()
            .all()
        )
        repeated = connection.execute(
            text(
                "SELECT idempotency_key FROM jobs WHERE idempotency_key IS NOT NULL "
                "GROUP BY 1 HAVING count(*) > 1"
            )
        ).all()
    runs_by_key = Counter(key for job_id, key in ledger.keys.items() if key is not None)
    assert ledger.during["enqueues"] > 0 and ledger.during["runs"] > 0, ledger.during
    assert repeated == []
    assert set(runs_by_key.values()) == {1}
    assert ledger.effects == Counter({job_id: 1 for job_id in ids if job_id not in finished_before})
    assert len(ids) == DONE + PENDING + RUNNING + LOCKED + GROUPED + DEBOUNCED + ledger.inserted
    with psycopg.connect(conninfo_of(at_0015)) as catalog:
        assert index_oids(catalog, [f"jobs_e0_{tail}" for tail in ADOPTED]) == old
    assert index_count(engine, "jobs_e0") == index_count(engine, "jobs") == 10
    assert index_count(engine, "jobs_e1") == 10

    assert epochs.make_next(engine) == "jobs_e1"
    assert epochs.switch(engine, utcnow(), timedelta(0)) == 1
    store, keys = JobStore(engine), [key for key in recorded if key is not None]
    assert not any(store.enqueue(NewJob(KIND, {}, key), kinds=[KIND]).inserted for key in keys)
    with engine.begin() as connection:
        again = [NewJob(KIND, {}, key) for key in keys[:100]]  # COPY-ed, then moved
        assert enqueue_many(connection, again, kinds=[KIND]) == 0
        made = [connection.execute(SQL_ENQUEUE, {"kind": KIND, "key": k}).scalar() for k in keys]
        assert set(made) <= set(ids)
        assert connection.execute(text("SELECT count(*) FROM jobs_e1")).scalar_one() == 0
    engine.dispose()
    faults = Counter(fault.split(" ")[1] for fault in ledger.faults)
    assert set(faults) <= TRANSIENT, ledger.faults
    print(f"inserted {ledger.inserted}; during the migration {dict(ledger.during)}; "
          f"faults retried {len(ledger.faults)} {dict(faults)}: {ledger.faults[:5]}")  # fmt: skip


def thread(target: Callable[..., None], *args: Any) -> threading.Thread:
    started = threading.Thread(target=target, args=args, daemon=True)
    started.start()
    return started


def unfinished(engine: Engine) -> int:
    query = text("SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')")
    with engine.connect() as connection:
        return int(connection.execute(query).scalar_one())
