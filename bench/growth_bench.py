"""How a push's cost grows with the inbox, and what the retention purge costs the pushes beside it
(not a test).

Growth: one database per level of ``--rows`` (default 0, 2 and 10 million), its inbox filled
with finished rows by ``INSERT ... SELECT ... FROM generate_series`` in batches: keys of the jobs
topic's shape, status ``done``, a wrapped message of about 450 bytes, created, updated and
finished times spread in order from the start of the last whole week past retention to now, each
row placed in its week's partition (``placed_at`` = ``consumer_inbox_week(t)``), then ``VACUUM
ANALYZE`` and ``CHECKPOINT``. Before the fill the past weeks are made (the migration of an
empty inbox starts with the current week): the state the inbox reaches one retention after the
migration. In ``inbox_default`` every row retention keeps would be carried out, a row's WAL
again. The
consumer's ``/push`` is measured on each exactly as ``bench/push_bench.py`` measures it, the
levels in turn, round after round, so the drift of a shared machine falls on all of them alike.
The table prints each level's medians (req/s, latency, CPU per push of the gunicorn workers and of
the database's backends), the median of the rounds' ratios to the empty inbox (target >= 0.90 at
the largest) and the bytes each inbox row takes with its indexes (``pg_total_relation_size``).

Purge (``--rate`` > 0): at the largest level an open-loop load of ``--rate`` pushes/s
(``bench.push_load.steady_load``: latency from each request's due time) runs ``--steady`` seconds,
then the cleanup task itself (``consumer.jobs.cleanup``: the weeks made ahead, the whole week past
retention dropped, ``consumer.inbox.partitions``; run again while it reports more) purges while
the load goes on, for at most ``--purge-seconds``; the push p99 before and during (over a window
as long as the one before, from the purge's start: ``bench.support.purge``) are printed with their
ratio, with the purge's WAL per row (the server's while it ran, less what the pushes
wrote at their rate before it) and the CPU of its own backends per row. ``--purge`` measures only
that: ``--repeat`` purges, each on a database freshly filled with the largest level's rows, no
growth rounds. Whenever a purge ran, the last line gives its medians (``purge: ...``).

    python -m bench.growth_bench [--rows 0,2000000,10000000] [--seconds 10] [--repeat 3]
                                 [--rate 200] [--steady 20] [--purge-seconds 60]
                                 [--chunk-rows 5000] [--pause-ratio 1] [--purge]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from datetime import datetime, timedelta
from typing import NamedTuple

import psycopg
from sqlalchemy import text

from bench.push_bench import median_of
from bench.push_serving import APPS, Run, database, measure, service_env, sqlalchemy_url
from bench.support.purge import PurgeRun, purge_line, purge_under_load, report_purge
from consumer.db.engine import make_engine
from consumer.inbox.partitions import WEEK, make_ahead
from consumer.jobs import cleanup as cleanup_task
from consumer.wire.timeutil import utcnow

RETENTION = timedelta(days=7)
"""The inbox's default retention."""
BATCH = 1_000_000
DAY = 86400.0
WEEK_OF = text("SELECT consumer_inbox_week(:t)")

FILL = """
INSERT INTO inbox (key, route, status, attempts, claimed_by, message_id, message, result,
                   created_at, updated_at, finished_at, placed_at)
SELECT 'job:projects/bench/subscriptions/jobs:' || id, 'job', 'done', 1, md5(n::text), id,
       ('{"messageId": "' || id || '", "publishTime": "' || to_char(t, 'YYYY-MM-DD"T"HH24:MI:SS')
        || 'Z", "data": "'
        || replace(encode(decode(repeat(md5(n::text), 9), 'hex'), 'base64'), chr(10), '')
        || '", "attributes": {"kind": "email", "key": "order-' || n || '"}, "subscription": '
        || '"projects/bench/subscriptions/jobs", "orderingKey": "", "deliveryAttempt": null, '
        || '"format": "wrapped"}')::json,
       '{"ok": true}'::json, t, t + interval '40 ms', t + interval '40 ms',
       consumer_inbox_week(t)
FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS n,
     LATERAL (SELECT (10000000000000000 + n)::text AS id,
                     %(now)s::timestamptz - interval '1 day' * %(days)s
                       * (1 - n::float8 / %(count)s) AS t) AS made
"""
"""One batch of finished rows, ``first``..``last``; their times run in order over the spread, as
a day's rows follow each other on disk, each row in its week's partition."""


class Level(NamedTuple):
    rows: int
    bytes_per_row: float
    runs: list[Run]


def fill(conninfo: str, rows: int) -> None:
    """``rows`` finished rows spread over the whole window, then ``VACUUM ANALYZE`` and a
    ``CHECKPOINT``: the fill's WAL (about 0.7 KB a row) would otherwise bring a checkpoint into
    the windows measured after it, which a service that was never bulk-loaded does not meet."""
    now = utcnow()
    days = (now - weeks_made(conninfo, now)).total_seconds() / DAY
    with psycopg.connect(conninfo, autocommit=True) as connection:
        for first in range(0, rows, BATCH):
            last = min(first + BATCH, rows) - 1
            started = time.monotonic()
            values = {"first": first, "last": last, "now": now, "days": days, "count": rows}
            connection.execute(FILL, values)
            print(f"  filled {last + 1:,} rows ({time.monotonic() - started:.0f} s)", flush=True)
        started = time.monotonic()
        connection.execute("VACUUM ANALYZE inbox")
        connection.execute("CHECKPOINT")
        print(f"  VACUUM ANALYZE, CHECKPOINT {time.monotonic() - started:.0f} s", flush=True)


def weeks_made(conninfo: str, now: datetime) -> datetime:
    """Make the weeks from the last whole one past retention to now's (the migration of an empty
    inbox made this week's and those ahead); the start of that week, where the fill begins."""
    engine = make_engine(sqlalchemy_url(conninfo))
    try:
        with engine.connect() as connection:
            first = connection.execute(WEEK_OF, {"t": now - RETENTION}).scalar_one() - WEEK
        made = make_ahead(engine, first, weeks=(now - first) // WEEK + 1)
        assert not made.skipped, made
    finally:
        engine.dispose()
    return first


def bytes_per_row(conninfo: str) -> float:
    """The inbox's heap, TOAST and indexes, per row: summed over its partitions (a partitioned
    table's own size is 0)."""
    with psycopg.connect(conninfo) as connection:
        row = connection.execute(
            "SELECT (SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('inbox')),"
            " (SELECT count(*) FROM inbox)"
        ).fetchone()
    assert row is not None
    return float(row[0]) / max(int(row[1]), 1)


def growth(databases: dict[int, str], args: argparse.Namespace) -> list[Level]:
    """Each level's database measured in turn, round after round: the machine's drift falls on
    every level alike, and each round's ratios pair runs a minute apart."""
    runs: dict[int, list[Run]] = {rows: [] for rows in databases}
    for run in range(args.repeat):
        for rows, conninfo in databases.items():
            runs[rows].append(measure(APPS["consumer"], service_env(conninfo, "on"), args, run))
            last = runs[rows][-1]
            cpu = f"CPU/push: app {last.app_cpu_ms:.2f} ms, db {last.db_cpu_ms:.2f} ms"
            print(f"  run {run + 1} {rows:>11,} rows {last.result}  {cpu}", flush=True)
    return [Level(rows, bytes_per_row(databases[rows]), runs[rows]) for rows in databases]


def report_growth(levels: list[Level], args: argparse.Namespace) -> None:
    print(f"\n/push against the inbox's size, gunicorn -w 2 -k sync, {args.connections} "
          f"connections, {args.seconds:g} s x {args.repeat}, levels in turn; medians:")  # fmt: skip
    print(f"  {'inbox rows':>11}  {'push/s':>7}  {'p50 ms':>6}  {'p99 ms':>6}  {'app ms':>6}  "
          f"{'db ms':>5}  {'vs empty':>8}  {'bytes/row':>9}")  # fmt: skip
    empty = levels[0].runs
    for level in levels:
        rps, p50, p99_ms, _errors, app_cpu, db_cpu = median_of(level.runs)
        ratio = paired(level.runs, empty)
        print(f"  {level.rows:>11,}  {rps:7.0f}  {p50:6.2f}  {p99_ms:6.2f}  {app_cpu:6.2f}  "
              f"{db_cpu:5.2f}  {ratio:7.2f}x  {level.bytes_per_row:9.0f}")  # fmt: skip
    full = levels[-1]
    cpu_ratio = statistics.median(
        (e.app_cpu_ms + e.db_cpu_ms) / (f.app_cpu_ms + f.db_cpu_ms)
        for f, e in zip(full.runs, empty, strict=True)
    )
    print(f"  ratio {full.rows:,} rows/empty {paired(full.runs, empty):.2f}x (target >= 0.90; "
          f"median of the rounds' ratios); CPU per push empty/full {cpu_ratio:.2f}x")  # fmt: skip


def paired(runs: list[Run], base: list[Run]) -> float:
    """The median of each round's ratio of req/s."""
    return statistics.median(r.result.rps / b.result.rps for r, b in zip(runs, base, strict=True))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=rows_list, default=[0, 2_000_000, 10_000_000])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rate", type=float, default=200.0, help="pushes/s; 0: no purge run")
    parser.add_argument("--steady", type=float, default=20.0, help="seconds before the purge")
    parser.add_argument("--purge-seconds", type=float, default=60.0, help="the purge's bound")
    parser.add_argument("--chunk-rows", type=int, default=cleanup_task.CHUNK_ROWS)
    parser.add_argument(
        "--pause-ratio",
        type=float,
        default=cleanup_task.PAUSE_RATIO,
        help="the purge's rest after each chunk, times the chunk's duration (0: back to back)",
    )
    parser.add_argument("--purge", action="store_true", help="only the purge, --repeat times")
    args = parser.parse_args(argv)
    args.worker = "sync"
    if args.purge and args.rate <= 0:
        parser.error("--purge needs a --rate above 0")
    return args


def rows_list(text: str) -> list[int]:
    return sorted(int(part.replace("_", "")) for part in text.split(","))


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    # The task's own constants, as its tests set them: what the purge would do with others.
    cleanup_task.CHUNK_ROWS, cleanup_task.PAUSE_RATIO = args.chunk_rows, args.pause_ratio
    purges: list[PurgeRun] = []
    if args.purge:
        for _ in range(args.repeat):
            with database() as conninfo:
                fill(conninfo, args.rows[-1])
                purges.append(purge_under_load(conninfo, args))
            report_purge(purges[-1], args)
    else:
        with contextlib.ExitStack() as stack:
            databases = {rows: stack.enter_context(database()) for rows in args.rows}
            for rows, conninfo in databases.items():
                fill(conninfo, rows)
            levels = growth(databases, args)
            report_growth(levels, args)
            if args.rate > 0:
                purges.append(purge_under_load(databases[args.rows[-1]], args))
                report_purge(purges[-1], args)
    if purges:
        print(purge_line(purges, args.rate))


if __name__ == "__main__":
    main()
