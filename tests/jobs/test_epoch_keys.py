"""The jobs table by epoch keeps its uniqueness rules across switches, step by step, on
PostgreSQL (migration ``0016_jobs_epochs``; the hammers: ``test_epoch_hammer``): a key an
earlier epoch holds is refused by every producer, a debounced enqueue folds into an earlier
epoch's pending job, a switch waits for the open writers, and a ``REPEATABLE READ`` snapshot
older than a switch cannot insert into the epoch it saw."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from sqlalchemy import Connection, Engine, func, literal_column, select, text

from consumer import enqueue_many
from consumer.db.engine import make_engine, sqlstate
from consumer.errors import Unavailable
from consumer.jobs import epochs
from consumer.jobs.bulk import JobTemplate, insert_jobs
from consumer.jobs.model import Debounce, Failure, NewJob
from consumer.jobs.new_rows import COPY_FROM
from consumer.jobs.schema import jobs
from consumer.jobs.store import JobStore
from consumer.pipeline.extensions import JobKinds
from consumer.wire.timeutil import utcnow
from tests.jobs.conftest import statuses
from tests.jobs.epoch_producers import (
    KIND,
    current_epoch,
    declared,
    enqueued,
    imported,
    job,
    producers,
    row_count,
    rows_by_key,
    switched,
)

pytestmark = pytest.mark.postgres
LOCK_WAITS = text(
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND wait_event_type = 'Lock'"
)


@pytest.fixture
def db(postgres_url: str, kinds: JobKinds) -> Iterator[Engine]:
    engine = make_engine(postgres_url)
    declared(engine, kinds, postgres_url)
    yield engine
    engine.dispose()


@pytest.mark.parametrize("first", list(producers()))
def test_a_key_an_earlier_epoch_holds_is_refused_by_every_producer(db: Engine, first: str) -> None:
    """Keys enqueued by ``first`` in epoch N, then by every producer in N+1 and in N+2: each
    keeps its one row, and every producer that reports an id reports that row's."""
    keys = [f"{first}:{n}" for n in range(COPY_FROM)]
    epoch = current_epoch(db)
    assert enqueued(first, producers()[first], db, keys).inserted in (len(keys), None)
    held = {key: rows for key, rows in rows_by_key(db).items()}
    assert sorted(held) == sorted(keys)
    assert {rows[0][1] for rows in held.values()} == {epoch}
    for later in (1, 2):
        assert switched(db) == epoch + later
        for name, producer in producers().items():
            again = enqueued(name, producer, db, keys)
            assert again.inserted in (0, None), (name, epoch + later)
            assert {key: found for key, found in again.ids.items() if found is not None} == {
                key: held[key][0][0] for key, found in again.ids.items() if found is not None
            }, (name, epoch + later)
        assert rows_by_key(db) == held, epoch + later


def test_an_import_mixing_keys_of_every_epoch_inserts_only_the_new_ones(db: Engine) -> None:
    """The bulk path's first try (no ``ON CONFLICT``) skips the earlier epochs' keys with no
    error; a key of the current epoch fails it, and the second try skips both kinds."""
    assert imported()(db, ["e0"]).inserted == 1
    switched(db)
    assert imported()(db, ["e0", "e1:a"]).inserted == 1  # e0 skipped on the first try
    assert imported()(db, ["e0", "e1:a", "e1:b", "e1:c"]).inserted == 2
    switched(db)
    assert imported()(db, ["e0", "e1:a", "e2", "e1:b", "e2"]).inserted == 1
    assert {key: [epoch for _, epoch in rows] for key, rows in rows_by_key(db).items()} == {
        "e0": [0], "e1:a": [1], "e1:b": [1], "e1:c": [1], "e2": [2],
    }  # fmt: skip


def test_inserts_after_a_bulk_move_in_its_transaction_are_still_checked(db: Engine) -> None:
    """The bulk moves look their keys up in the earlier epochs themselves, with the trigger held
    off for their transaction (``KEYS_CHECKED``), and set it back after: a later insert of the
    same transaction is still refused a key an earlier epoch holds."""
    held = JobStore(db).enqueue(job("held"), allow_unknown=True)
    switched(db)
    with db.begin() as connection:
        fresh = [job(f"fresh:{n}") for n in range(COPY_FROM)]
        assert enqueue_many(connection, fresh, allow_unknown=True) == COPY_FROM
        rows = [("held", "{}"), ("fresh:0", "{}")]  # the first try fails: the second moves
        assert insert_jobs(connection, JobTemplate(KIND), rows) == 0
        again = JobStore(db).enqueue(job("held"), allow_unknown=True, connection=connection)
        few = enqueue_many(connection, [job("held")], allow_unknown=True)
    assert (again.job_id, few) == (held.job_id, 0)
    assert rows_by_key(db)["held"] == [(held.job_id, 0)]


def debounced(payload: int, quiet: float) -> NewJob:
    return NewJob(KIND, {"n": payload}, debounce=Debounce("d", quiet=quiet, max_wait=100))


def pending_debounced(engine: Engine) -> list[tuple[int, int, object, datetime, datetime]]:
    query = select(
        jobs.c.id, literal_column("epoch"), jobs.c.payload, jobs.c.run_at, jobs.c.debounce_until
    ).where(jobs.c.debounce_key == "d", jobs.c.status == "pending")
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(query)]  # type: ignore[misc]


def test_a_debounced_enqueue_folds_into_an_earlier_epochs_pending_job(db: Engine) -> None:
    store = JobStore(db)
    first = store.enqueue(debounced(0, quiet=10), allow_unknown=True)
    assert first.inserted and first.job_id is not None
    [(_, _, _, _, until)] = pending_debounced(db)
    assert switched(db) == 1
    assert store.enqueue(debounced(1, quiet=20), allow_unknown=True).job_id == first.job_id
    [(job_id, epoch, payload, run_at, _)] = pending_debounced(db)
    assert (job_id, epoch, payload) == (first.job_id, 0, {"n": 1})
    assert run_at < until
    assert switched(db) == 2
    with db.begin() as connection:  # in the caller's transaction, past the longest wait
        again = store.enqueue(debounced(2, quiet=100), allow_unknown=True, connection=connection)
    assert again.job_id == first.job_id
    assert pending_debounced(db) == [(first.job_id, 0, {"n": 2}, until, until)]
    assert row_count(db) == 1


def test_a_debounced_enqueue_after_its_earlier_job_ran_is_a_new_job(db: Engine) -> None:
    """Only a pending job takes the fold: one claimed in an earlier epoch leaves the key free."""
    store = JobStore(db)
    first = store.enqueue(debounced(0, quiet=1), allow_unknown=True)
    now = utcnow() + timedelta(seconds=2)
    assert [claimed.id for claimed in store.claim("t", 5, [KIND], now, now)] == [first.job_id]
    switched(db)
    later = store.enqueue(debounced(1, quiet=1), allow_unknown=True)
    assert later.inserted and later.job_id != first.job_id
    assert [(row[0], row[1]) for row in pending_debounced(db)] == [(later.job_id, 1)]


def test_a_switch_waits_for_an_open_writer_and_succeeds_once_it_commits(db: Engine) -> None:
    epoch = current_epoch(db)
    assert epochs.make_next(db) is not None
    with db.begin() as connection:
        held = JobStore(db).enqueue(job("open"), allow_unknown=True, connection=connection)
        assert epochs.switch(db, utcnow(), timedelta(0)) is None  # every try timed out
        assert current_epoch(db) == epoch
    assert epochs.switch(db, utcnow(), timedelta(0)) == epoch + 1
    assert JobStore(db).enqueue(job("open"), allow_unknown=True).job_id == held.job_id
    assert rows_by_key(db) == {"open": [(held.job_id, epoch)]}


def repeatable_read(engine: Engine) -> Connection:
    return engine.connect().execution_options(isolation_level="REPEATABLE READ")


def test_a_repeatable_read_snapshot_older_than_a_switch_cannot_insert(db: Engine) -> None:
    """Its snapshot still sees the ended epoch as current: the insert fails with 40001 (the
    caller retries, as it must at that level) instead of writing into that epoch."""
    epoch = current_epoch(db)
    assert epochs.make_next(db) is not None
    with repeatable_read(db) as connection, connection.begin():
        connection.execute(select(func.count()).select_from(jobs))  # the snapshot is taken
        assert switched(db) == epoch + 1
        with pytest.raises(Unavailable) as refused:
            JobStore(db).enqueue(job("rr"), allow_unknown=True, connection=connection)
    cause = refused.value.__cause__
    assert cause is not None and sqlstate(cause) == "40001"  # type: ignore[arg-type]
    assert row_count(db) == 0
    with repeatable_read(db) as connection, connection.begin():  # a snapshot after it inserts
        JobStore(db).enqueue(job("rr"), allow_unknown=True, connection=connection)
    assert rows_by_key(db)["rr"][0][1] == epoch + 1


def claimed_debounced(db: Engine) -> int:
    """A debounced job of epoch 0, claimed by ``t``, then the epoch moved on: its id."""
    store = JobStore(db)
    first = store.enqueue(debounced(0, quiet=1), allow_unknown=True)
    now = utcnow() + timedelta(seconds=2)
    assert [job.id for job in store.claim("t", 5, [KIND], now, now + timedelta(minutes=5))] == [
        first.job_id
    ]
    assert switched(db) == 1
    assert first.job_id is not None
    return first.job_id


def retried(db: Engine, job_id: int, connection: Connection | None = None) -> None:
    failure = Failure(job_id, False, utcnow(), "failed", [])
    assert JobStore(db).complete("t", utcnow(), failures=[failure], connection=connection)


def waits_or_ends(db: Engine, thread: threading.Thread) -> None:
    """Until ``thread`` has ended or waits for a lock (the open transaction's): its write has
    then been tried while that transaction is open, whatever the timing."""
    deadline = time.monotonic() + 30
    while thread.is_alive() and time.monotonic() < deadline:
        with db.connect() as connection:
            if connection.execute(LOCK_WAITS).scalar_one():
                return
        time.sleep(0.01)


def test_a_debounced_retry_meeting_an_open_enqueue_of_its_key_in_a_later_epoch_is_cancelled(
    db: Engine,
) -> None:
    """The retry cannot see the later job until its enqueue commits, and no index of one epoch
    sees both: it waits for that enqueue (the debounce key's lock), then ends ``cancelled``."""
    first = claimed_debounced(db)
    with db.begin() as connection:
        later = JobStore(db).enqueue(
            debounced(1, quiet=1), allow_unknown=True, connection=connection
        )
        retry = threading.Thread(target=retried, args=(db, first))
        retry.start()
        waits_or_ends(db, retry)
    retry.join()
    assert [(row[0], row[1]) for row in pending_debounced(db)] == [(later.job_id, 1)]
    assert statuses(db)[first] == "cancelled"


def test_a_debounced_enqueue_meeting_an_open_retry_of_its_key_folds_into_it(db: Engine) -> None:
    """The enqueue cannot see the retried job pending until the retry commits: it waits for it
    (the debounce key's lock), then folds into it instead of making a second pending job."""
    first = claimed_debounced(db)
    enqueued_ids: list[int | None] = []

    def enqueue() -> None:
        enqueued_ids.append(JobStore(db).enqueue(debounced(1, quiet=1), allow_unknown=True).job_id)

    with db.begin() as connection:
        retried(db, first, connection)
        later = threading.Thread(target=enqueue)
        later.start()
        waits_or_ends(db, later)
    later.join()
    assert enqueued_ids == [first]
    assert [(row[0], row[1], row[2]) for row in pending_debounced(db)] == [(first, 0, {"n": 1})]
