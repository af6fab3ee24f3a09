"""WAL written per purged job: an epoch of finished jobs retired whole (``epoch_retire.retire``:
the survey, the check under the lock, the detach, the drop) against today's chunked purge
(``JobStore.purge``, chunks of ``cleanup.CHUNK_ROWS``) of the same jobs, in one run, on a fresh
migrated database (not a test).

Both start after a ``CHECKPOINT``, so each pays the full-page images a purge pays in production
after one. The WAL position is the cluster's, so another database's writes count: the least of
``--rounds`` rounds is printed (run it alone all the same).
Last line: ``jobs retire: N bytes WAL/row (N rows), chunked delete N bytes WAL/row``

    python -m bench.jobs_retire [--rows 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, text

from bench.support.postgres import PG_ADMIN_DSN, migrated_postgres_database
from consumer.db.engine import make_engine
from consumer.jobs import epochs
from consumer.jobs.cleanup import CHUNK_ROWS
from consumer.jobs.epoch_retire import retire
from consumer.jobs.store import JobStore

RETENTION = timedelta(days=7)
FINISHED_ROWS = """
INSERT INTO jobs (kind, payload, status, priority, run_at, attempts, created_at, updated_at,
                  finished_at, idempotency_key, result)
SELECT 'email', jsonb_build_object('to', 'user' || n || '@example.com', 'text', 'hello'),
       'done', 0, :finished, 1, :finished, :finished, :finished, :prefix || n, '{"sent": true}'
FROM generate_series(1, :rows) AS n
"""
"""Finished keyed jobs, as the sweep leaves them; into the current epoch."""


def fill(engine: Engine, rows: int, prefix: str, finished: datetime) -> None:
    with engine.begin() as connection:
        values = {"rows": rows, "prefix": prefix, "finished": finished}
        connection.execute(text(FINISHED_ROWS), values)


def wal_per_row(engine: Engine, purge: Callable[[], int]) -> tuple[float, int]:
    """WAL bytes per job ``purge`` says it removed, after a checkpoint; and that count."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("CHECKPOINT"))
        start = connection.execute(text("SELECT pg_current_wal_insert_lsn()")).scalar_one()
        purged = purge()
        wal = connection.execute(
            text("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), :start)"), {"start": start}
        ).scalar_one()
    return float(wal) / max(purged, 1), purged


def chunked(engine: Engine, cutoff: datetime) -> int:
    """Today's purge, chunk after chunk, without the task's rests (WAL does not depend on them)."""
    store, purged = JobStore(engine), 0
    while deleted := store.purge(cutoff, limit=CHUNK_ROWS):
        purged += deleted
    return purged


def round_of(engine: Engine, rows: int, number: int) -> tuple[tuple[float, int], float]:
    """One epoch of ``rows`` finished jobs retired, then as many deleted in chunks:
    ``((WAL bytes per row, rows retired), WAL bytes per row deleted)``."""
    now = datetime.now(UTC)
    cutoff, finished = now - RETENTION, now - RETENTION - timedelta(days=1)
    assert epochs.make_next(engine) is not None
    fill(engine, rows, f"retired-{number}-", finished)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        current = epochs.current(connection).number
        connection.execute(text(f"ANALYZE {epochs.partition_name(current)}"))  # as autovacuum
    assert epochs.switch(engine, now + 2 * RETENTION, RETENTION) == current + 1
    retired = wal_per_row(engine, lambda: retire(engine, cutoff).rows)
    fill(engine, rows, f"chunked-{number}-", finished)
    per_row, deleted = wal_per_row(engine, lambda: chunked(engine, cutoff))
    assert deleted == rows, deleted
    return retired, per_row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="finished jobs in the epoch")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with migrated_postgres_database(PG_ADMIN_DSN, prefix="jobs_retire") as url:
        engine = make_engine(url)
        try:
            rounds = [round_of(engine, args.rows, number) for number in range(args.rounds)]
        finally:
            engine.dispose()
    retired = min(retired for retired, _ in rounds)
    deleted = min(deleted for _, deleted in rounds)
    print(
        f"jobs retire: {retired[0]:.2f} bytes WAL/row ({retired[1]} rows), "
        f"chunked delete {deleted:.1f} bytes WAL/row"
    )


if __name__ == "__main__":
    main()
