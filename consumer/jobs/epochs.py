"""PostgreSQL's jobs table by epoch (migration ``0016_jobs_epochs``): the next epoch's partition
made ahead, and the switch to it once the current epoch is as old as its length.

The switch keeps the one rule the partitioned table's uniqueness rests on: **no transaction
inserts into an epoch once a later one is current**. It takes ``LOCK TABLE jobs IN SHARE
MODE``, which waits for every transaction that wrote to the table and holds off new writers,
then moves ``job_epochs`` on; an insert reads the epoch (the column's default) in a snapshot
taken after its own lock. The lock is asked for under ``lock_timeout`` (writers queue behind it
while it waits), a few times, then left for the next run: an epoch then lasts a little longer.
A young epoch's partition is analyzed once it holds jobs (``analyze_young``); the epochs past
retention are dropped by ``consumer.jobs.epoch_retire``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine, text

from consumer.db import locked
from consumer.db.partitioned import partitioned

DAY = timedelta(days=1)
LONGEST = timedelta(days=7)
LOCK_TIMEOUT = "200ms"
"""How long writers may queue behind the switch's lock request, at most, per try."""
LOCK_TRIES = 3
LOCK_REST_SECONDS = 0.2
LOCK_NOT_GRANTED = f"lock not granted in {LOCK_TRIES} x {LOCK_TIMEOUT}"

CURRENT = text("SELECT epoch, started_at FROM job_epochs WHERE ended_at IS NULL")
EXISTS = text("SELECT to_regclass(:name) IS NOT NULL")
UNANALYZED = text(
    "SELECT coalesce(last_analyze, last_autoanalyze) IS NULL FROM pg_stat_user_tables "
    "WHERE relid = to_regclass(:name)"
)
SWITCH = """
DO $switch$
DECLARE
    ending integer;
BEGIN
    PERFORM set_config('lock_timeout', '{lock_timeout}', true);
    LOCK TABLE jobs IN SHARE MODE;
    UPDATE job_epochs SET ended_at = now() WHERE ended_at IS NULL AND epoch = {epoch}
        RETURNING epoch INTO ending;
    IF ending IS NOT NULL THEN
        INSERT INTO job_epochs (epoch, started_at) VALUES ({epoch} + 1, now());
    END IF;
END $switch$
"""
"""One transaction and one round trip: the lock is held for no client's latency. Switches only
from ``epoch`` (another pod's cleanup may have switched first)."""


@dataclass(frozen=True)
class Epoch:
    number: int
    started_at: datetime


def partition_name(epoch: int) -> str:
    return f"jobs_e{epoch}"


def epoch_length(retention: timedelta) -> timedelta:
    """How long an epoch lasts: the jobs' retention, within a day and a week. A finished job is
    then kept between its retention and its retention plus one epoch; a shorter epoch would
    keep more partitions, each one more probe for every keyed insert."""
    return min(LONGEST, max(DAY, retention))


def by_epoch(engine: Engine) -> bool:
    """Whether ``engine``'s jobs table is partitioned by epoch."""
    return partitioned(engine, "jobs")


def current(connection: Connection) -> Epoch:
    row = connection.execute(CURRENT).one()
    return Epoch(int(row.epoch), row.started_at)


def make_next(engine: Engine) -> str | None:
    """The next epoch's partition, made if missing (before the switch needs it, so the switch
    holds its lock for no DDL); its name, or ``None`` if its lock was not granted."""
    with engine.connect() as connection:
        name = partition_name(current(connection).number + 1)
        if connection.execute(EXISTS, {"name": name}).scalar_one():
            return name
    made = locked.block(
        LOCK_TIMEOUT,
        f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF jobs "
        f"FOR VALUES IN ({name.removeprefix('jobs_e')})",
    )
    return name if tried(engine, made) else None


def switch(engine: Engine, now: datetime, length: timedelta) -> int | None:
    """The next epoch made current if the current one is ``length`` old at ``now`` and its
    partition exists; the new epoch, or ``None`` (not due, or the lock not granted)."""
    with engine.connect() as connection:
        epoch = current(connection)
        ready = connection.execute(EXISTS, {"name": partition_name(epoch.number + 1)}).scalar_one()
    if epoch.started_at + length > now or not ready:
        return None
    if not tried(engine, SWITCH.format(lock_timeout=LOCK_TIMEOUT, epoch=epoch.number)):
        return None
    with engine.connect() as connection:
        after = current(connection).number
    return after if after > epoch.number else None


def tried(engine: Engine, block: str) -> bool:
    """``block`` alone in autocommit, tried ``LOCK_TRIES`` times; whether it ran."""
    return locked.tried(engine, block, LOCK_TRIES, LOCK_REST_SECONDS)


def analyze_young(engine: Engine) -> str | None:
    """The current epoch's partition analyzed if it holds jobs and has no statistics yet; its
    name, or ``None`` (nothing to do, or the lock not granted).

    Called by the runs that did not switch, so the new epoch is analyzed by the first run after
    its switch: then it holds a day of jobs, a sample of the pending and finished mix the claim's
    plan needs (unanalyzed, the claim sorted all of its pending jobs instead of merging the
    partitions' ordered indexes). Analyzed at the switch it would be empty: statistics of
    nothing, counted as an analysis, so not redone until autovacuum's threshold. A partition
    autovacuum analyzed first is left to it; a statistics reset costs one more ANALYZE."""
    with engine.connect() as connection:
        name = partition_name(current(connection).number)
        if not connection.execute(UNANALYZED, {"name": name}).scalar():
            return None
        if not connection.execute(text(f"SELECT EXISTS (SELECT FROM {name})")).scalar_one():
            return None
    return name if tried(engine, locked.block(LOCK_TIMEOUT, f"ANALYZE {name}")) else None
