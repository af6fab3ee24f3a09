"""Benchmark enqueueing jobs on PostgreSQL against direct SQL (not a test).

Modes, each on a fresh migrated database, interleaved, ``--repeat`` times, medians:
  many    ``enqueue_many`` of ``--jobs`` no-op jobs (each its own idempotency key) in one
          transaction: rate and this process's CPU per job.
  COPY    the floor of ``many``: the same rows, made beforehand, ``COPY``-ed straight into
          ``jobs`` by psycopg, one transaction.
  one     ``enqueue`` of ``--one`` jobs, one call (its own transaction) each: CPU per job.
  direct  the floor of ``one``: the same ``INSERT ... ON CONFLICT DO NOTHING RETURNING id``,
          compiled by the same code, sent by psycopg on one kept connection in autocommit (its
          own transaction, no ``BEGIN``/``COMMIT`` round trips: the cheapest way to send it).
  direct-tx  the same, each ``INSERT`` between ``BEGIN`` and ``COMMIT`` (psycopg's default): what
          a team's own code usually pays, shown beside the floor.
Each run checks that every job it enqueued is in ``jobs``, once, ids in the order given. The
last line sets each beside its floor (``enqueue: ...``); CPU per job is steadier than any rate on
a shared machine.

    python -m bench.enqueue_bench [--jobs 20000] [--one 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections.abc import Callable

import psycopg

from bench.pgdb import database
from bench.support.aged_epochs import AGE_LINE, age
from consumer import NewJob, enqueue, enqueue_many
from consumer.db.engine import make_engine
from consumer.db.migrate import upgrade
from consumer.db.prepared import Prepared
from consumer.jobs.new_rows import new_row, one_job
from consumer.wire.timeutil import utcnow

KIND = "email"
Timed = tuple[float, float]
"""(wall seconds, this process's CPU seconds)."""


def timed(run: Callable[[], object]) -> Timed:
    started, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - started, time.process_time() - cpu


def new_jobs(count: int) -> list[NewJob]:
    tag = uuid.uuid4().hex[:8]
    return [NewJob(KIND, {"n": n, "to": "a@example.com"}, key=f"{tag}-{n}") for n in range(count)]


def bench_many(url: str, count: int) -> Timed:
    engine = make_engine(url)
    jobs = new_jobs(count)

    def run() -> None:
        with engine.begin() as connection:
            assert enqueue_many(connection, jobs) == count

    try:
        return timed(run)
    finally:
        engine.dispose()


def bench_copy(conninfo: str, count: int) -> Timed:
    now = utcnow()
    rows = [
        (job.kind, json.dumps(job.payload), "pending", 0, now, 0, job.key, now, now)
        for job in new_jobs(count)
    ]
    copy_in = (
        "COPY jobs (kind, payload, status, priority, run_at, attempts, idempotency_key, "
        "created_at, updated_at) FROM STDIN"
    )

    with psycopg.connect(conninfo) as connection:

        def run() -> None:
            with connection.cursor() as cursor, cursor.copy(copy_in) as copy:
                for row in rows:
                    copy.write_row(row)
            connection.commit()

        return timed(run)


def bench_one(url: str, count: int) -> Timed:
    engine = make_engine(url)
    jobs = new_jobs(count)
    enqueue(engine, KIND, {}, key=f"warm-{uuid.uuid4().hex}")  # connect, compile

    def run() -> None:
        for job in jobs:
            assert enqueue(engine, job.kind, job.payload, key=job.key).inserted

    try:
        return timed(run)
    finally:
        engine.dispose()


def bench_direct(url: str, conninfo: str, count: int, autocommit: bool = True) -> Timed:
    """The same statement ``enqueue`` runs, compiled once, its values made as ``enqueue``
    makes them, sent by psycopg: what any enqueue through this schema costs (without
    ``autocommit``: a transaction of its own each, as psycopg's default does it)."""
    engine = make_engine(url)
    statement = Prepared.compile(one_job("postgresql"), engine.dialect)
    engine.dispose()
    jobs = new_jobs(count)

    with psycopg.connect(conninfo, autocommit=autocommit) as connection:

        def run() -> None:
            for job in jobs:
                args = statement.args(new_row(job, utcnow()))
                with connection.cursor() as cursor:
                    cursor.execute(statement.sql, args)
                    assert cursor.fetchone() is not None
                if not autocommit:
                    connection.commit()

        return timed(run)


def check(conninfo: str, expected: int) -> None:
    """Every job once, ids in the order the jobs were given (their ``n``)."""
    with psycopg.connect(conninfo) as connection:
        found = connection.execute(
            "SELECT count(*), count(DISTINCT idempotency_key) FROM jobs WHERE kind = %s", (KIND,)
        ).fetchone()
        order = connection.execute(
            "SELECT bool_and(n > prev) FROM (SELECT (payload->>'n')::int AS n, "
            "lag((payload->>'n')::int, 1, -1) OVER (PARTITION BY split_part(idempotency_key, "
            "'-', 1) ORDER BY id) AS prev FROM jobs WHERE payload->>'n' IS NOT NULL) AS o"
        ).fetchone()
    assert found == (expected, expected), (found, expected)
    assert order is not None and order[0] in (True, None), "ids out of the order given"


def run_mode(mode: str, args: argparse.Namespace) -> Timed:
    with database("enqueue_bench") as conninfo:
        url = conninfo.replace("postgresql://", "postgresql+psycopg://")
        upgrade(url)
        age(url)
        if mode == "many":
            result, count = bench_many(url, args.jobs), args.jobs
        elif mode == "COPY":
            result, count = bench_copy(conninfo, args.jobs), args.jobs
        elif mode == "one":
            result, count = bench_one(url, args.one), args.one + 1
        else:
            autocommit = mode == "direct"
            result, count = bench_direct(url, conninfo, args.one, autocommit), args.one
        check(conninfo, count)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per enqueue_many run")
    parser.add_argument("--one", type=int, default=2_000, help="jobs per enqueue run")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    modes = ("many", "COPY", "one", "direct", "direct-tx")
    runs: dict[str, list[Timed]] = {mode: [] for mode in modes}
    print(AGE_LINE)
    for run in range(args.repeat):  # interleaved: the machine's drift falls on every mode
        for mode in modes:
            runs[mode].append(run_mode(mode, args))
            seconds, cpu = runs[mode][-1]
            count = args.jobs if mode in ("many", "COPY") else args.one
            print(f"  run {run + 1} {mode:<9} {count / seconds:9,.0f} jobs/s  "
                  f"cpu {cpu * 1e6 / count:7.1f} us/job", flush=True)  # fmt: skip
    print(enqueue_line(runs, args))


def enqueue_line(runs: dict[str, list[Timed]], args: argparse.Namespace) -> str:
    def rate(mode: str, count: int) -> float:
        return count / statistics.median(seconds for seconds, _ in runs[mode])

    def cpu_us(mode: str, count: int) -> float:
        return statistics.median(cpu for _, cpu in runs[mode]) * 1e6 / count

    many, floor = rate("many", args.jobs), rate("COPY", args.jobs)
    one, direct = cpu_us("one", args.one), cpu_us("direct", args.one)
    each = cpu_us("direct-tx", args.one)
    return (f"enqueue: many {many:.0f} jobs/s (cpu {cpu_us('many', args.jobs):.1f} us/job) "
            f"vs COPY {floor:.0f}; one {one:.0f} us/job vs direct INSERT {direct:.0f} us: "
            f"{one / direct:.2f} x (a transaction each: {each:.0f} us)")  # fmt: skip


if __name__ == "__main__":
    main()
