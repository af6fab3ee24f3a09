"""Benchmark what a /metrics scrape costs the database (not a test).

On a PostgreSQL database filled with ``--jobs`` jobs (40% pending and due, 50% done, 5% dead,
5% running), ``--jobs / 3`` inbox rows and ``--jobs / 30`` processed files, it measures:
  state     one uncached read of consumer.http.state_metrics.StateCollector (all its queries, in one
            transaction under the statement timeout, through SQLAlchemy);
  floor     the same statements sent by plain psycopg on an open connection;
  scrape    a whole in-process /metrics payload with the state cached (what most scrapes cost).
Medians of ``--repeat`` runs, and the ratio state/floor.

    python -m bench.metrics_bench [--jobs 300000] [--repeat 7]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from datetime import UTC, datetime

import psycopg
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy.dialects.postgresql import psycopg as dialect

from bench.pgdb import database, median_seconds
from consumer.db.engine import make_engine
from consumer.db.migrate import upgrade
from consumer.http import state_metrics as metrics_state

FILL = """
INSERT INTO jobs (kind, payload, status, priority, run_at, attempts, created_at, updated_at)
SELECT 'kind' || (i % 5), '{}', CASE WHEN i % 20 < 8 THEN 'pending' WHEN i % 20 < 18 THEN 'done'
       WHEN i % 20 = 18 THEN 'dead' ELSE 'running' END,
       0, now() - interval '1 minute' * (i % 600), 1, now(), now()
FROM generate_series(1, %(jobs)s) AS i;
INSERT INTO inbox (key, route, status, attempts, message_id, message, created_at, updated_at)
SELECT 'k' || i, 'tick', CASE WHEN i % 10 = 0 THEN 'dead' ELSE 'done' END, 1, 'm' || i, '{}',
       now(), now()
FROM generate_series(1, %(jobs)s / 3) AS i;
INSERT INTO processed_files (bucket, name, generation, processor, status, rows_accepted,
       rows_rejected, jobs_created, resume_line, resume_offset, attempts, duration_ms,
       started_at, updated_at)
SELECT 'b', 'f' || i, 1, 'p', CASE WHEN i % 7 = 0 THEN 'partial' ELSE 'done' END, 1, 0, 1, 1, 1,
       1, 1, now(), now()
FROM generate_series(1, %(jobs)s / 30) AS i;
ANALYZE;
"""


def floor_statements(now: datetime) -> list[tuple[str, dict[str, object]]]:
    """The collector's statements compiled for psycopg, with their parameters."""
    statements = []
    for build in (
        lambda c: metrics_state.jobs_by_kind_status(c),
        lambda c: metrics_state.oldest_due_run_at(c, now),
        lambda c: metrics_state.inbox_by_route_status(c),
        lambda c: metrics_state.files_by_status(c),
        lambda c: metrics_state.tick_last_slots(c),
    ):
        recorder = Recorder()
        build(recorder)
        statements.extend(recorder.compiled)
    return statements


class Recorder:
    """Stands in for a Connection just to capture the statement a named query builds."""

    def __init__(self) -> None:
        self.compiled: list[tuple[str, dict[str, object]]] = []

    def execute(self, statement: object) -> Recorder:
        compiled = statement.compile(  # type: ignore[attr-defined]
            dialect=dialect.dialect(), compile_kwargs={"render_postcompile": True}
        )
        self.compiled.append((compiled.string, dict(compiled.params)))
        return self

    def __iter__(self) -> Iterator[tuple[object, ...]]:
        return iter(())

    def scalar_one_or_none(self) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with database("metrics_bench") as conninfo:
        url = conninfo.replace("postgresql://", "postgresql+psycopg://")
        upgrade(url)
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute(FILL.replace("%(jobs)s", str(args.jobs)))
        engine = make_engine(url)
        collector = metrics_state.StateCollector(engine, lambda: {"sweep": 300}, cache_seconds=0)
        list(collector.collect())  # warm the pool and the caches
        state = median_seconds(lambda: list(collector.collect()), args.repeat)
        statements = floor_statements(datetime.now(UTC))
        with psycopg.connect(conninfo) as connection:

            def floor() -> None:
                with connection.transaction():
                    for sql, params in statements:
                        connection.execute(sql, params).fetchall()

            floor()
            direct = median_seconds(floor, args.repeat)
        cached = metrics_state.StateCollector(engine, lambda: {"sweep": 300})
        registry = CollectorRegistry(auto_describe=False)
        registry.register(cached)
        scrape = median_seconds(lambda: generate_latest(registry), args.repeat * 20)
        engine.dispose()
    print(f"jobs={args.jobs} repeat={args.repeat} row_cap={metrics_state.ROW_CAP}")
    print(f"state (uncached) {state * 1000:8.1f} ms")
    print(f"floor (psycopg)  {direct * 1000:8.1f} ms")
    print(f"ratio state/floor {state / direct:.2f}")
    print(f"scrape (cached)  {scrape * 1000:8.3f} ms")


if __name__ == "__main__":
    main()
