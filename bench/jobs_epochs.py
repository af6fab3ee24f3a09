"""What partitioning the jobs table by epoch would cost and save, measured on a prototype of the
layout beside the plain table in one database at ``0015_inbox_partitions``, the schema before the
jobs were partitioned (not a test; docs/retention.md, "The jobs table by epochs"). The prototype
names the epoch as a literal in every statement; the built design (``0016_jobs_epochs``) reads it
in the column's default and looks into earlier epochs from a trigger, and its costs are measured
by the product's own benches (docs/performance.md).

- ``keyed enqueue``: ``--jobs`` single-row keyed enqueues, each its own transaction (prepared,
  one connection): today's ``INSERT ... ON CONFLICT DO NOTHING`` against the epochs' insert,
  which also looks the key up in every earlier epoch. Database CPU per job (``/proc``).
- ``bulk``: ``--batch`` keys ``COPY``-ed into a stage and moved by one ``INSERT ... SELECT``, as
  the import and ``enqueue_many`` do. Database CPU per row.
- ``retire``: the finished rows of one epoch removed: deleted in chunks of 1,000 (today's purge)
  against the partition detached and dropped. WAL per row (the cluster's insert position: run
  it alone).
- ``hammer``: ``--threads`` writers enqueue the same ``--keys`` keys over and over, each in a
  transaction held open a moment, while the epoch is switched every few milliseconds; a key on
  more than one row is a duplicate. Once with the switch waiting for the writers under ``SHARE``
  on the table (the design), once without (what the lock is for).

Every old epoch holds ``--rows`` finished keyed rows, and ``jobs_plain`` as many: both tables'
key indexes are as deep. Medians of ``--rounds`` rounds, the two tables alternating. Last line:
``jobs epochs: keyed enqueue db cpu N us vs N us: N x; bulk N vs N us/row: N x; retire WAL N vs N
B/row; hammer duplicates N with the lock, N without``

    python -m bench.jobs_epochs [--jobs 2000] [--batch 20000] [--rows 200000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial

import psycopg

from bench.support.cpu import cpu_seconds, spent
from bench.support.job_epochs import (
    PLAIN_ENQUEUE,
    PLAIN_MOVE,
    PLAIN_REVISION,
    STAGE,
    current_epoch,
    drain,
    enqueue,
    epoch_enqueue,
    epoch_move,
    fill,
    lay_out,
    partition,
    switch,
)
from bench.support.postgres import PG_ADMIN_DSN, conninfo_of, migrated_postgres_database

SWITCH_EVERY = 0.05
HELD = 0.02
"""How long a writer's transaction stays open after its insert."""


def db_cpu_per_unit(connection: psycopg.Connection, run: Callable[[], int]) -> float:
    """Microseconds of the connection's backend CPU per unit ``run`` reports doing."""
    backend = [connection.info.backend_pid]
    before = cpu_seconds(backend)
    units = run()
    return spent(before, cpu_seconds(backend)) / units * 1e6


def keyed(connection: psycopg.Connection, statement: str, jobs: int) -> int:
    for _ in range(jobs):
        connection.execute(statement, {"key": uuid.uuid4().hex}, prepare=True)
    return jobs


def bulk(connection: psycopg.Connection, move: str, batch: int) -> int:
    with connection.transaction():
        connection.execute(STAGE)
        with connection.cursor().copy("COPY stage (key) FROM STDIN") as copy:
            for _ in range(batch):
                copy.write_row((f"bucket/file.csv#1:{uuid.uuid4().hex}",))
        moved = connection.execute(move).rowcount
    assert moved == batch, moved
    return batch


def wal_position(connection: psycopg.Connection) -> int:
    row = connection.execute("SELECT pg_current_wal_insert_lsn() - '0/0'").fetchone()
    assert row is not None
    return int(row[0])


def retire(conninfo: str, rows: int) -> tuple[float, float]:
    """WAL bytes per row: epoch 0's rows deleted from ``jobs_plain`` in chunks, then epoch 0's
    partition detached and dropped."""
    with psycopg.connect(conninfo, autocommit=True) as connection:
        start, deleted = wal_position(connection), 0
        while count := connection.execute(
            "DELETE FROM jobs_plain WHERE id IN (SELECT id FROM jobs_plain "
            "WHERE idempotency_key LIKE 'old-0-%' LIMIT 1000)"
        ).rowcount:
            deleted += count
        plain = (wal_position(connection) - start) / deleted
        start = wal_position(connection)
        connection.execute("ALTER TABLE jobs_epochs DETACH PARTITION jobs_epochs_e0")
        connection.execute("DROP TABLE jobs_epochs_e0")
        epochs = (wal_position(connection) - start) / rows
    assert deleted == rows, deleted
    return plain, epochs


def hammer(
    conninfo: str, locked: bool, keys: int, threads: int, seconds: float
) -> tuple[int, float]:
    """Duplicated keys after ``seconds`` of writers racing epoch switches; and the longest wait
    of a switch for its lock. Every ``SWITCH_EVERY`` a new batch of ``keys`` keys is handed out
    just before the switch, so the first inserts of a key straddle it (once a key is committed,
    every later insert finds it: only first inserts can race). The partitions are made first,
    so that making one does not wait for the writers itself."""
    first, switches = next_epoch(conninfo), int(seconds / SWITCH_EVERY)
    for epoch in range(first + 1, first + switches + 1):
        partition(conninfo, epoch)
    stop, batch = threading.Event(), [0]

    def writer() -> None:
        with psycopg.connect(conninfo) as connection:
            epoch = first
            while not stop.is_set():
                key = f"hammer-{locked}-{batch[0]}-{random.randrange(keys)}"
                with connection.transaction():
                    _, epoch = enqueue(connection, key, epoch)
                    time.sleep(HELD)  # the caller's own work before its commit

    workers = [threading.Thread(target=writer) for _ in range(threads)]
    for worker in workers:
        worker.start()
    waits = []
    with psycopg.connect(conninfo, autocommit=True) as connection:
        for epoch in range(first + 1, first + switches + 1):
            time.sleep(SWITCH_EVERY)
            batch[0] += 1
            time.sleep(HELD / 2)
            waits.append(switch(connection, epoch, locked))
    stop.set()
    for worker in workers:
        worker.join()
    with psycopg.connect(conninfo, autocommit=True) as connection:
        row = connection.execute(
            "SELECT count(*) FROM (SELECT idempotency_key FROM jobs_epochs WHERE idempotency_key "
            "LIKE %s GROUP BY 1 HAVING count(*) > 1) d",
            (f"hammer-{locked}-%",),
        ).fetchone()
    assert row is not None
    return int(row[0]), max(waits)


def next_epoch(conninfo: str) -> int:
    with psycopg.connect(conninfo, autocommit=True) as connection:
        return current_epoch(connection)


def ratio(measured: float, floor: float) -> float:
    """``nan`` where the floor read no CPU at all (``/proc`` counts 10 ms ticks: a short run)."""
    return measured / floor if floor else math.nan


def per_unit_cpu(conninfo: str, args: argparse.Namespace) -> dict[str, float]:
    """Database CPU per job of each enqueue, medians of the rounds, the tables alternating."""
    samples: dict[str, list[float]] = {}
    with psycopg.connect(conninfo, autocommit=True) as connection:
        epoch = current_epoch(connection)
        runs = {
            "plain": partial(keyed, connection, PLAIN_ENQUEUE, args.jobs),
            "epochs": partial(keyed, connection, epoch_enqueue(epoch), args.jobs),
            "bulk plain": partial(bulk, connection, PLAIN_MOVE, args.batch),
            "bulk epochs": partial(bulk, connection, epoch_move(epoch), args.batch),
        }
        sweeps = {"sweep plain": ("jobs_plain", None), "sweep epochs": ("jobs_epochs", epoch)}
        for _ in range(args.rounds):
            for name, run in runs.items():
                samples.setdefault(name, []).append(db_cpu_per_unit(connection, run))
            for name, (table, named) in sweeps.items():
                fill(connection, table, named, args.sweep)
                drained = partial(drain, connection, table, named)
                samples.setdefault(name, []).append(db_cpu_per_unit(connection, drained))
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=20000)
    parser.add_argument("--sweep", type=int, default=20000, help="jobs claimed and done a round")
    parser.add_argument("--rows", type=int, default=200000, help="finished rows per old epoch")
    parser.add_argument("--old-epochs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keys", type=int, default=5)
    parser.add_argument("--threads", type=int, default=6)
    parser.add_argument("--hammer-seconds", type=float, default=5.0)
    args = parser.parse_args()
    with migrated_postgres_database(PG_ADMIN_DSN, "jobs_epochs", PLAIN_REVISION) as url:
        conninfo = conninfo_of(url)
        lay_out(conninfo, args.old_epochs, args.rows)
        cpu = per_unit_cpu(conninfo, args)
        wal_plain, wal_epochs = retire(conninfo, args.rows)
        unlocked = hammer(conninfo, False, args.keys, args.threads, args.hammer_seconds)
        locked = hammer(conninfo, True, args.keys, args.threads, args.hammer_seconds)
    print(f"{args.old_epochs} old epochs of {args.rows} finished rows; medians of {args.rounds}")
    for name, value in cpu.items():
        print(f"  db cpu {name:12} {value:8.1f} us/job")
    print(f"  retire: WAL {wal_plain:.1f} B/row deleted in chunks, {wal_epochs:.2f} dropped")
    print(
        f"  hammer: {args.threads} writers x {args.keys} keys, {args.hammer_seconds} s: "
        f"duplicates {locked[0]} with the lock (longest wait {locked[1] * 1000:.1f} ms), "
        f"{unlocked[0]} without"
    )
    keyed_ratio, bulk_ratio = (
        ratio(cpu["epochs"], cpu["plain"]),
        ratio(cpu["bulk epochs"], cpu["bulk plain"]),
    )
    sweep_ratio = ratio(cpu["sweep epochs"], cpu["sweep plain"])
    print(
        f"jobs epochs: keyed enqueue db cpu {cpu['epochs']:.1f} us vs {cpu['plain']:.1f} us: "
        f"{keyed_ratio:.2f} x; bulk {cpu['bulk epochs']:.1f} vs {cpu['bulk plain']:.1f} us/row: "
        f"{bulk_ratio:.2f} x; sweep {cpu['sweep epochs']:.1f} vs {cpu['sweep plain']:.1f} us/job: "
        f"{sweep_ratio:.2f} x; retire WAL {wal_epochs:.2f} vs {wal_plain:.1f} B/row; "
        f"hammer duplicates {locked[0]} with the lock, {unlocked[0]} without"
    )


if __name__ == "__main__":
    main()
