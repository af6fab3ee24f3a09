"""A bench's jobs table as it stands in production on PostgreSQL: earlier epochs holding finished
keyed jobs (migration ``0016_jobs_epochs``). A fresh database has one epoch and no earlier one, so
a keyed insert would skip the trigger that looks into earlier epochs, and the claim would read one
partition: the figures would leave the epochs' cost out.

``BENCH_OLD_EPOCHS`` (2: the current epoch and the two before it, what a 7-day retention keeps)
and ``BENCH_OLD_ROWS`` (100,000 finished jobs in each, the current one too) set the age; the
benches' CI slices set them small.
"""

from __future__ import annotations

import os
from datetime import timedelta

import psycopg

from bench.support.postgres import conninfo_of
from consumer.db.engine import make_engine
from consumer.jobs import epochs
from consumer.wire.timeutil import utcnow

OLD_EPOCHS = int(os.environ.get("BENCH_OLD_EPOCHS", "2"))
OLD_ROWS = int(os.environ.get("BENCH_OLD_ROWS", "100000"))
FINISHED = (
    "INSERT INTO jobs (kind, payload, status, priority, run_at, attempts, idempotency_key, "
    "created_at, updated_at, finished_at) SELECT 'aged', '{}', 'done', 0, now(), 1, "
    "'aged-' || %(epoch)s || '-' || n, now(), now(), now() FROM generate_series(1, %(rows)s) n"
)


AGE_LINE = (
    f"jobs table: {OLD_EPOCHS} earlier epochs of {OLD_ROWS} finished keyed jobs each "
    "(BENCH_OLD_EPOCHS, BENCH_OLD_ROWS)"
)
"""What a bench prints about the age of its databases."""


def age(url: str, old_epochs: int = OLD_EPOCHS, rows: int = OLD_ROWS) -> None:
    """``old_epochs`` epochs of ``rows`` finished keyed jobs each before the current one, which
    holds as many, its next partition made, all of them vacuumed and analyzed: an epoch in its
    week, as autovacuum keeps it. (In the minute after a switch, before autovacuum analyzes the
    young epoch, the claim sorts its pending jobs: docs/performance.md.)"""
    engine = make_engine(url)
    try:
        with psycopg.connect(conninfo_of(url), autocommit=True) as connection:
            for epoch in range(old_epochs):
                connection.execute(FINISHED, {"epoch": epoch, "rows": rows})
                epochs.make_next(engine)
                switched = epochs.switch(engine, utcnow() + timedelta(seconds=1), timedelta(0))
                assert switched == epoch + 1, switched
            connection.execute(FINISHED, {"epoch": old_epochs, "rows": rows})
            epochs.make_next(engine)
            for epoch in range(old_epochs + 1):
                connection.execute(f"VACUUM ANALYZE {epochs.partition_name(epoch)}")
    finally:
        engine.dispose()
