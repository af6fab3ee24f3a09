"""Every producer of the PostgreSQL jobs table, as a call that enqueues keyed jobs of one kind and
says what it reported, and the epoch switch forced: shared by the epoch tests
(``test_epoch_keys``, ``test_epoch_hammer``), which hold each uniqueness rule across switches
(migration ``0016_jobs_epochs``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import NamedTuple

from sqlalchemy import Connection, Engine, func, literal_column, select, text

from consumer import NewJob, enqueue_many
from consumer.config.settings import Settings
from consumer.jobs import epochs
from consumer.jobs.bulk import JobTemplate, insert_jobs
from consumer.jobs.declared import declare
from consumer.jobs.model import EnqueueResult
from consumer.jobs.new_rows import COPY_FROM
from consumer.jobs.schema import jobs
from consumer.jobs.store import JobStore
from consumer.pipeline.extensions import JobKinds
from consumer.wire.timeutil import utcnow

KIND = "record"
SQL_ENQUEUE = text("SELECT consumer_enqueue(:kind, CAST(:payload AS jsonb), :key)")


def declared(engine: Engine, kinds: JobKinds, url: str) -> None:
    """The kinds in ``job_kinds``, as a serving process declares them (``consumer_enqueue``
    refuses an undeclared kind)."""
    with engine.begin() as connection:
        declare(connection, kinds, Settings.of(database_url=url, local_mode=True))


def switched(engine: Engine) -> int:
    """The next epoch made and made current now (an epoch of length 0 is always due)."""
    assert epochs.make_next(engine) is not None
    epoch = epochs.switch(engine, utcnow(), timedelta(0))
    assert epoch is not None, "the switch's lock was not granted"
    return epoch


def current_epoch(engine: Engine) -> int:
    with engine.connect() as connection:
        return epochs.current(connection).number


def job(key: str) -> NewJob:
    return NewJob(KIND, {"key": key}, key)


class Enqueued(NamedTuple):
    ids: dict[str, int | None]
    """Key -> the id the producer reported for it (``None``: a producer that reports no ids)."""
    inserted: int | None
    """How many jobs the producer said it inserted (``None``: it does not say)."""


Producer = Callable[[Engine, Sequence[str]], Enqueued]


def pinned(engine: Engine, keys: Sequence[str]) -> Enqueued:
    """``JobStore.enqueue`` alone: the thread's kept autocommit connection."""
    store = JobStore(engine)
    results = {key: store.enqueue(job(key), allow_unknown=True) for key in keys}
    return _reported(results)


def in_transaction(hold: float = 0.0) -> Producer:
    """``JobStore.enqueue`` inside the caller's transaction, kept open ``hold`` seconds after
    the last insert (a producer's own work before its commit)."""

    def produce(engine: Engine, keys: Sequence[str]) -> Enqueued:
        store = JobStore(engine)
        with engine.begin() as connection:
            results = {
                key: store.enqueue(job(key), allow_unknown=True, connection=connection)
                for key in keys
            }
            time.sleep(hold)
        return _reported(results)

    return produce


def _reported(results: dict[str, EnqueueResult]) -> Enqueued:
    inserted = sum(result.inserted for result in results.values())
    return Enqueued({key: result.job_id for key, result in results.items()}, inserted)


def many(hold: float = 0.0) -> Producer:
    """``enqueue_many`` of all the keys in one call: one multi-row ``INSERT`` under
    ``COPY_FROM`` jobs, the ``COPY`` path from there on."""

    def produce(engine: Engine, keys: Sequence[str]) -> Enqueued:
        with engine.begin() as connection:
            inserted = enqueue_many(connection, [job(key) for key in keys], allow_unknown=True)
            time.sleep(hold)
        return Enqueued(dict.fromkeys(keys), inserted)

    return produce


def imported(hold: float = 0.0) -> Producer:
    """The file import's bulk insert (``consumer.jobs.bulk``, as ``local_import`` calls it)."""

    def produce(engine: Engine, keys: Sequence[str]) -> Enqueued:
        rows = [(key, json.dumps({"key": key})) for key in keys]
        with engine.begin() as connection:
            inserted = insert_jobs(connection, JobTemplate(KIND), rows)
            time.sleep(hold)
        return Enqueued(dict.fromkeys(keys), inserted)

    return produce


def in_sql(hold: float = 0.0) -> Producer:
    """``consumer_enqueue``, the SQL function, in one transaction (the kind must be declared:
    ``declared``)."""

    def produce(engine: Engine, keys: Sequence[str]) -> Enqueued:
        with engine.begin() as connection:
            ids = {key: sql_enqueue(connection, key) for key in keys}
            time.sleep(hold)
        return Enqueued(ids, None)

    return produce


def sql_enqueue(connection: Connection, key: str) -> int | None:
    values = {"kind": KIND, "payload": json.dumps({"key": key}), "key": key}
    return connection.execute(SQL_ENQUEUE, values).scalar()


def producers(hold: float = 0.0) -> dict[str, Producer]:
    """Every producer by name, those with a transaction of their own holding it ``hold`` s;
    ``few`` and ``copy`` are the same call, given keys as ``batches`` cuts them."""
    return {
        "pinned": pinned, "in_transaction": in_transaction(hold), "few": many(hold),
        "copy": many(hold), "import": imported(hold), "sql": in_sql(hold),
    }  # fmt: skip


def batches(name: str, keys: Sequence[str]) -> list[Sequence[str]]:
    """``keys`` as the producer ``name`` is given them: ``few`` fewer than ``COPY_FROM`` at a
    time (one multi-row ``INSERT`` each), the others all at once (``copy``: at least
    ``COPY_FROM``, so ``enqueue_many`` copies them)."""
    if name == "few":
        step = COPY_FROM // 4
        return [keys[at : at + step] for at in range(0, len(keys), step)]
    if name == "copy":
        assert len(keys) >= COPY_FROM, "the COPY path needs COPY_FROM jobs"
    return [keys]


def enqueued(name: str, producer: Producer, engine: Engine, keys: Sequence[str]) -> Enqueued:
    """``keys`` through ``producer`` in the batches its ``name`` takes."""
    ids: dict[str, int | None] = {}
    counts: list[int | None] = []
    for batch in batches(name, keys):
        ids.update((result := producer(engine, batch)).ids)
        counts.append(result.inserted)
    return Enqueued(ids, None if None in counts else sum(c or 0 for c in counts))


def rows_by_key(engine: Engine) -> dict[str, list[tuple[int, int]]]:
    """Key -> its rows in the whole table, as (id, epoch)."""
    query = select(jobs.c.idempotency_key, jobs.c.id, literal_column("epoch")).order_by(jobs.c.id)
    found: dict[str, list[tuple[int, int]]] = {}
    with engine.connect() as connection:
        for key, job_id, epoch in connection.execute(query):
            found.setdefault(str(key), []).append((int(job_id), int(epoch)))
    return found


def row_count(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(jobs)).scalar_one())
