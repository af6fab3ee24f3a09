"""The locks one claim and one finish of the partitioned inbox take (not a test).

PostgreSQL keeps up to 16 relation locks per backend in its fast path; past them, each lock goes
through the shared lock table (a hash probe under a partition's LWLock). The claim locks every
partition it looks the key up in, and the index of each partition it probes, so a layout with
more weeks, or plans that probe more indexes, may spill. This prints, for a database laid out as
``bench.inbox_claim``'s ``partitioned`` one, what a claim and then its finish hold at the end of
their statement, in steady state (generic plans, after a warm-up), twice: with this week's
partition never analyzed (a fresh week, before autovacuum's first visit: bitmap scans, every
week's key index probed) and after ``ANALYZE`` (an empty week is then planned as a scan of no
pages, which locks no index).

    python -m bench.inbox_locks [--past-weeks 2]
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg

from bench.inbox_claim import MODES, database, pair, partitions

HELD = """
SELECT count(*) FILTER (WHERE locktype = 'relation' AND fastpath),
       count(*) FILTER (WHERE locktype = 'relation' AND NOT fastpath),
       string_agg(locktype, ', ' ORDER BY locktype) FILTER (WHERE locktype <> 'relation')
FROM pg_locks
WHERE pid = pg_backend_pid() AND relation IS DISTINCT FROM 'pg_locks'::regclass
  AND locktype <> 'virtualxid'
"""
"""Relation locks in the fast path, in the shared table, and the other kinds (the key's
advisory lock, the transaction id); this query's own lock on ``pg_locks`` left out."""


def held(connection: psycopg.Connection[Any]) -> str:
    row = connection.execute(HELD).fetchone()
    assert row is not None
    fast, shared, others = row
    return f"{fast + shared} relation locks ({fast} fast-path, {shared} shared), + {others}"


def counted(connection: psycopg.Connection[Any], state: str) -> Iterator[str]:
    """What one claim, then its finish, holds (each in a transaction of its own, as in
    autocommit), after 50 pairs have settled the plans."""
    mode, batch, now = MODES["partitioned"], uuid.uuid4().hex[:8], datetime.now(UTC)
    for warm in range(50):
        pair(connection, mode, f"warm-{batch}-{warm}", now)
    key = f"job:{batch}"
    with connection.transaction():
        values = {"key": key, "lease": now, "token": "t", "id": key, "message": "{}", "now": now}
        row = connection.execute(mode.claim, values, prepare=True).fetchone()
        assert row is not None
        yield f"{state:<12} claim:  {held(connection)}"
    with connection.transaction():
        finish = mode.finish.format(table=row[1])
        connection.execute(finish, {**values, "result": "{}"}, prepare=True)
        yield f"{state:<12} finish: {held(connection)}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--past-weeks", type=int, default=2)
    args = parser.parse_args(argv)
    with database("partitioned", args.past_weeks) as conninfo:
        print(f"{partitions(conninfo)} partitions")
        with psycopg.connect(conninfo, autocommit=True) as connection:
            week = connection.execute(
                "SELECT 'inbox_w' || to_char(consumer_inbox_week(now()), 'YYYYMMDD')"
            ).fetchone()
            assert week is not None
            connection.execute(f"ALTER TABLE {week[0]} SET (autovacuum_enabled = off)")
            for line in counted(connection, "unanalyzed"):
                print(line)
            connection.execute("ANALYZE inbox")
            for line in counted(connection, "analyzed"):
                print(line)


if __name__ == "__main__":
    main()
