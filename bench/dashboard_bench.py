"""Benchmark the dashboard's overview on PostgreSQL (not a test).

Fills a fresh database with ``--rows`` inbox rows and as many jobs (mixed statuses, kinds and
ages over a week, as a retained week of traffic looks), then times, as medians of ``--repeat``:
  overview  consumer.dashboard.queries.overview(): what one page load or ``consumer status`` costs;
  floor     the same grouped counts and lists hand-written in SQL, sent through psycopg;
and prints the ratio overview/floor (the price of SQLAlchemy and the row objects; target <= 1.5).

    python -m bench.dashboard_bench [--rows 100000 300000] [--repeat 7]
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

import psycopg

from bench.pgdb import database, median_seconds

FILL = """
INSERT INTO inbox (key, route, status, attempts, message_id, message, created_at, updated_at)
SELECT 'k' || i, (ARRAY['tick','storage','deploy'])[1 + i %% 3],
       (ARRAY['done','done','done','done','skipped','dead','unroutable','failed'])[1 + i %% 8],
       1, i::text, '{}'::json, now() - (i %% 604800) * interval '1 second',
       now() - (i %% 604800) * interval '1 second'
FROM generate_series(1, %(rows)s) AS i;
INSERT INTO jobs (kind, payload, status, priority, run_at, attempts, created_at, updated_at)
SELECT (ARRAY['email','report','import'])[1 + i %% 3], '{}'::json,
       (ARRAY['done','done','done','done','pending','dead','cancelled'])[1 + i %% 7], 0,
       now() - (i %% 604800) * interval '1 second', 1, now(), now()
FROM generate_series(1, %(rows)s) AS i;
ANALYZE;
"""
FLOOR = (
    "SELECT status, count(*) FROM inbox WHERE updated_at >= now() - interval '1 hour' "
    "GROUP BY status",
    "SELECT status, count(*) FROM inbox WHERE updated_at >= now() - interval '1 day' "
    "GROUP BY status",
    "SELECT status, count(*) FROM inbox WHERE status IN ('dead', 'unroutable') GROUP BY status",
    "SELECT kind, status, count(*) FROM jobs GROUP BY kind, status",
    "SELECT min(run_at) FROM jobs WHERE status = 'pending' AND run_at <= now()",
    "SELECT task, last_slot FROM tick_progress",
    "SELECT * FROM processed_files ORDER BY updated_at DESC LIMIT 8",
    "SELECT * FROM warm_runs ORDER BY id DESC LIMIT 8",
)


def measure(rows: int, repeat: int) -> tuple[float, float]:
    from consumer.config.settings import Settings
    from consumer.dashboard.queries import overview
    from consumer.db.engine import make_engine
    from consumer.db.migrate import upgrade
    from consumer.plugins import build_registry

    with database("dashboard_bench") as conninfo:
        url = conninfo.replace("postgresql://", "postgresql+psycopg://")
        upgrade(url)
        with psycopg.connect(conninfo, autocommit=True) as connection:
            for statement in filter(str.strip, FILL.split(";")):
                connection.execute(statement, {"rows": rows})
            engine = make_engine(url)
            registry = build_registry(Settings(database_url=url))
            overview(engine, registry, datetime.now(UTC))  # warm the pool and the caches

            def floor() -> None:
                for query in FLOOR:
                    connection.execute(query).fetchall()

            floor_ms = 1000 * median_seconds(floor, repeat)
            ours_ms = 1000 * median_seconds(
                lambda: overview(engine, registry, datetime.now(UTC)), repeat
            )
            engine.dispose()
    return ours_ms, floor_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 300_000])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"{'rows':>9} {'overview ms':>12} {'floor ms':>9} {'ratio':>6}")
    for rows in args.rows:
        ours, floor = measure(rows, args.repeat)
        print(f"{rows:>9} {ours:>12.1f} {floor:>9.1f} {ours / floor:>6.2f}")


if __name__ == "__main__":
    main()
