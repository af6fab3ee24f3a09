"""What the jobs table by epoch costs the database per unit, with the product's own statements,
against the table in one piece (not a test; docs/retention.md, "The jobs table by epochs").

Two databases: ``plain`` at ``0015_inbox_partitions``, the last schema before the partitions,
and ``epochs`` at the head, aged as production's stands (``bench.support.aged_epochs``: epochs
of finished keyed jobs); ``plain`` holds the same finished jobs, so both key indexes are as
deep. Database CPU per unit
is read from ``/proc`` for every backend of the database; medians of ``--rounds`` rounds, the
two databases alternating.

- ``keyed enqueue``: ``JobStore.enqueue`` of a keyed job, each its own transaction (the same
  statement on both: the epoch is the column's default, the trigger looks into earlier epochs);
- ``imported row``: ``--batch`` keyed rows ``COPY``-ed into the stage and moved by one insert
  without ``ON CONFLICT``, the import's usual move (``plain``: the statement before
  ``0016_jobs_epochs``; ``epochs``: the product's, which looks the keys up in earlier epochs);
- ``swept job``: ``JobStore.claim`` of 100 due jobs and the ``done`` write of them, until
  ``--sweep`` jobs are drained (the same statements on both; the claim reads every partition).

Last line: ``jobs epochs cost: keyed enqueue db N vs N us: N x; imported row N vs N us: N x;
swept job N vs N us: N x``

    python -m bench.jobs_epoch_cost [--jobs 2000] [--batch 20000] [--sweep 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import re
import statistics
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import timedelta

import psycopg
from sqlalchemy import Engine

from bench.support.aged_epochs import FINISHED, OLD_EPOCHS, OLD_ROWS, age
from bench.support.cpu import backends, cpu_seconds, spent
from bench.support.postgres import PG_ADMIN_DSN, conninfo_of, migrated_postgres_database
from consumer.db.engine import make_engine
from consumer.jobs.bulk_queries import CREATE_STAGE, INSERT_STAGE, KEYS_CHECKED
from consumer.jobs.model import NewJob
from consumer.jobs.store import JobStore
from consumer.wire.timeutil import utcnow

PLAIN_REVISION = "0015_inbox_partitions"
PLAIN_MOVE = (
    "INSERT INTO jobs (kind, payload, status, priority, run_at, attempts, max_attempts, "
    "idempotency_key, created_at, updated_at) "
    "SELECT %(kind)s, payload::json, %(status)s, %(priority)s, %(run_at)s, 0, %(max_attempts)s, "
    "idempotency_key, %(now)s, %(now)s FROM jobs_stage"
)
"""The import's first-try move as it was before ``0016_jobs_epochs``."""
EPOCHS_MOVE = re.sub(r"(?<!:):(\w+)", r"%(\1)s", INSERT_STAGE.text)
"""The product's first-try move, in psycopg's parameter style."""
PENDING = (
    "INSERT INTO jobs (kind, payload, status, priority, run_at, attempts, created_at, "
    "updated_at) SELECT 'noop', '{}', 'pending', 0, now(), 0, now(), now() "
    "FROM generate_series(1, %s)"
)
KIND = "noop"
CLAIMED = 100
LEASE = timedelta(minutes=5)


class Database:
    """One of the two databases, with an engine and the store the product uses."""

    def __init__(self, url: str) -> None:
        self.url, self.conninfo = url, conninfo_of(url)
        self.engine: Engine = make_engine(url)
        self.store = JobStore(self.engine)

    def db_cpu(self, run: Callable[[], int]) -> float:
        """Microseconds of the database's CPU (every backend) per unit ``run`` says it did."""
        pids = backends(self.conninfo)
        before = cpu_seconds(pids)
        units = run()
        return spent(before, cpu_seconds(pids)) * 1e6 / units


@contextmanager
def databases(old_epochs: int, rows: int) -> Iterator[dict[str, Database]]:
    with ExitStack() as stack:
        plain = stack.enter_context(
            migrated_postgres_database(PG_ADMIN_DSN, "epoch_cost_plain", PLAIN_REVISION)
        )
        epochs = stack.enter_context(migrated_postgres_database(PG_ADMIN_DSN, "epoch_cost"))
        with psycopg.connect(conninfo_of(plain), autocommit=True) as connection:
            for epoch in range(old_epochs):
                connection.execute(FINISHED, {"epoch": epoch, "rows": rows})
            connection.execute("VACUUM ANALYZE jobs")
        age(epochs, old_epochs, rows)
        found = {"plain": Database(plain), "epochs": Database(epochs)}
        try:
            yield found
        finally:
            for database in found.values():
                database.engine.dispose()


def keyed_enqueues(database: Database, jobs: int) -> float:
    tag = uuid.uuid4().hex
    database.store.enqueue(NewJob(KIND, {}, key=f"warm-{tag}"), allow_unknown=True)

    def run() -> int:
        for n in range(jobs):
            job = NewJob(KIND, {"n": n}, key=f"{tag}-{n}")
            assert database.store.enqueue(job, allow_unknown=True).inserted
        return jobs

    return database.db_cpu(run)


def imported_rows(database: Database, name: str, batch: int) -> float:
    tag = uuid.uuid4().hex
    params = {
        "kind": KIND, "status": "pending", "priority": 0, "run_at": utcnow(),
        "max_attempts": None, "now": utcnow(),
    }  # fmt: skip
    with psycopg.connect(database.conninfo) as connection:
        pid = [connection.info.backend_pid]
        with connection.cursor() as cursor:
            cursor.execute(CREATE_STAGE)
            with cursor.copy("COPY jobs_stage (idempotency_key, payload) FROM STDIN") as copy:
                for n in range(batch):
                    copy.write_row((f"{tag}-{n}", '{"to": "someone@example.com"}'))
            before = cpu_seconds(pid)
            if name == "epochs":
                cursor.execute(KEYS_CHECKED.format("on"))
            cursor.execute(EPOCHS_MOVE if name == "epochs" else PLAIN_MOVE, params)
            assert cursor.rowcount == batch, cursor.rowcount
            if name == "epochs":
                cursor.execute(KEYS_CHECKED.format("off"))
        connection.commit()
        return spent(before, cpu_seconds(pid)) * 1e6 / batch


def swept_jobs(database: Database, jobs: int) -> float:
    with psycopg.connect(database.conninfo, autocommit=True) as connection:
        connection.execute(PENDING, (jobs,))
        connection.execute("ANALYZE jobs")  # as autovacuum would have after so many inserts
    token = uuid.uuid4().hex
    database.store.claim(token, 1, [KIND], utcnow(), utcnow() + LEASE)  # connect, warm

    def run() -> int:
        drained = 0
        while claimed := database.store.claim(token, CLAIMED, [KIND], utcnow(), utcnow() + LEASE):
            database.store.complete(token, utcnow(), done=[job.id for job in claimed])
            drained += len(claimed)
        return drained

    return database.db_cpu(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000, help="keyed enqueues a round")
    parser.add_argument("--batch", type=int, default=20000, help="imported rows a round")
    parser.add_argument("--sweep", type=int, default=20000, help="jobs swept a round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    samples: dict[tuple[str, str], list[float]] = {}
    with databases(OLD_EPOCHS, OLD_ROWS) as found:
        for _ in range(args.rounds):
            for name, database in found.items():
                for unit, value in (
                    ("keyed enqueue", keyed_enqueues(database, args.jobs)),
                    ("imported row", imported_rows(database, name, args.batch)),
                    ("swept job", swept_jobs(database, args.sweep)),
                ):
                    samples.setdefault((unit, name), []).append(value)
    median = {key: statistics.median(values) for key, values in samples.items()}
    print(f"{OLD_EPOCHS} earlier epochs of {OLD_ROWS} finished keyed jobs; {args.rounds} rounds")
    parts = []
    for unit in ("keyed enqueue", "imported row", "swept job"):
        epochs, plain = median[(unit, "epochs")], median[(unit, "plain")]
        print(f"  db cpu {unit:14} epochs {epochs:7.1f} us  plain {plain:7.1f} us")
        label = "keyed enqueue db" if unit == "keyed enqueue" else unit
        parts.append(f"{label} {epochs:.1f} vs {plain:.1f} us: {_ratio(epochs, plain)} x")
    print("jobs epochs cost: " + "; ".join(parts))


def _ratio(value: float, floor: float) -> str:
    return f"{value / floor:.2f}" if floor > 0 else "nan"


if __name__ == "__main__":
    main()
