"""What the partitioned inbox's claim costs the database, beside the one-table claim it replaced
(not a test).

Three databases, each driven by one client connection in autocommit with server-side prepared
statements, as the pods' straight-to-libpq path runs them:

- ``floor``: the two-writes route's statements (``bench.push_floor_app:two_writes()``) on its
  two-column table: a claim ``INSERT ... ON CONFLICT DO NOTHING`` and an ``UPDATE`` by key, the
  floor the push bench sets the consumer beside (a HOT update, one index, no message kept);
- ``table``: the inbox as one table (revision ``0014_inbox_placed``), claimed as before the
  partitions: ``INSERT ... ON CONFLICT (key) DO UPDATE ... WHERE ... RETURNING attempts``, then the
  finish by key and token;
- ``function``: the same table claimed by ``consumer_inbox_claim`` (the advisory lock, the lookup,
  the insert): what the function costs without partitions;
- ``partitioned``: the inbox partitioned (every revision), with ``--past-weeks`` week partitions
  made before this one as a running service keeps them (and, to measure what each partition
  costs, only ``--weeks-ahead`` of the four ahead, without the default one with
  ``--no-default``), claimed the same way and finished in the partition the claim named (as the
  code does);
- ``via parent``: the same, finished through the parent by key (every partition's index probed).
  Through the parent naming the row's week instead, PostgreSQL keeps a custom plan (pruning) and
  plans the update on every run: 1.43x of ``table`` in one sitting, against 1.20x for every
  statement forced generic; naming the partition needs neither.

Every database is analyzed after each round's warm-up, as autovacuum keeps a service's: a week's
partition that was never analyzed is planned with bitmap scans, and autovacuum analyzing it
mid-run changed the plan under the measure.

Each round makes ``--pairs`` claims of new keys and their finishes on each database in turn
(the order rotating), and reads the backend's CPU from ``/proc`` around them; the medians of
``--rounds`` rounds are printed per pair, with the ratios to ``table``. CPU per pair is what this
machine measures steadily; the wall time is printed for reference. The last line:
``inbox claim+finish db cpu: floor N us, table N us, function N us, partitioned N us (N
partitions): N x`` (the ratio to ``table``).

    python -m bench.inbox_claim [--pairs 5000] [--rounds 5] [--past-weeks 2] [--weeks-ahead 4]
                                [--no-default]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import psycopg
from psycopg.types.json import Json

from bench.push_floor_app import TABLES, TWO_WRITES_TABLE
from bench.support.cpu import cpu_seconds, spent
from bench.support.postgres import PG_ADMIN_DSN, conninfo_of, migrated_postgres_database

TABLE_CLAIM = """
INSERT INTO inbox (key, route, status, attempts, lease_until, claimed_by, message_id, message,
                   created_at, updated_at)
VALUES (%(key)s, 'job', 'running', 1, %(lease)s, %(token)s, %(id)s, %(message)s, %(now)s, %(now)s)
ON CONFLICT (key) DO UPDATE SET status = 'running', attempts = inbox.attempts + 1,
    lease_until = excluded.lease_until, claimed_by = excluded.claimed_by,
    message_id = excluded.message_id, message = excluded.message, updated_at = excluded.updated_at
WHERE inbox.status = 'failed'
   OR (inbox.status = 'running' AND inbox.lease_until < excluded.updated_at)
RETURNING attempts
"""
FUNCTION_CLAIM = """
SELECT attempts, stored_in FROM consumer_inbox_claim(
    %(key)s, 'job', %(lease)s, %(token)s, %(id)s, %(message)s, %(now)s)
"""
FLOOR_CLAIM = f"""
INSERT INTO {TWO_WRITES_TABLE} (key, status) VALUES (%(key)s, 'running') ON CONFLICT DO NOTHING
RETURNING 1, '{TWO_WRITES_TABLE}'
"""
FINISH = """
UPDATE {table} SET status = 'done', result = %(result)s, updated_at = %(now)s, lease_until = NULL,
    finished_at = %(now)s
WHERE key = %(key)s AND claimed_by = %(token)s AND (status = 'running') IS TRUE
"""
FLOOR_FINISH = "UPDATE {table} SET status = 'done' WHERE key = %(key)s AND status = 'running'"


class Mode(NamedTuple):
    revision: str
    claim: str
    finish: str
    finish_in: str | None
    """The table the finish updates; ``None``: the one the claim named."""
    analyzed: str


MODES = {
    "floor": Mode("0014_inbox_placed", FLOOR_CLAIM, FLOOR_FINISH, None, TWO_WRITES_TABLE),
    "table": Mode("0014_inbox_placed", TABLE_CLAIM, FINISH, "inbox", "inbox"),
    "function": Mode("0014_inbox_placed", FUNCTION_CLAIM, FINISH, None, "inbox"),
    "partitioned": Mode("heads", FUNCTION_CLAIM, FINISH, None, "inbox"),
    "via parent": Mode("heads", FUNCTION_CLAIM, FINISH, "inbox", "inbox"),
}
MESSAGE = {"messageId": "1", "data": "eyJraW5kIjogImVtYWlsIn0=", "attributes": {"kind": "email"}}


@contextlib.contextmanager
def database(
    mode: str, past_weeks: int, weeks_ahead: int = 4, default: bool = True
) -> Iterator[str]:
    revision = MODES[mode].revision
    with migrated_postgres_database(PG_ADMIN_DSN, "inbox_claim", revision) as url:
        conninfo = conninfo_of(url)
        if revision == "heads":
            make_past_weeks(conninfo, past_weeks)
            trim(conninfo, weeks_ahead, default)
        if mode == "floor":
            with psycopg.connect(conninfo, autocommit=True) as connection:
                connection.execute(f"CREATE TABLE {TWO_WRITES_TABLE} ({TABLES[TWO_WRITES_TABLE]})")
        yield conninfo


def make_past_weeks(conninfo: str, weeks: int) -> None:
    """The layout of a service that has run for ``weeks`` weeks past the migration: no legacy
    partition (a fresh database has none), a partition for this week and each of the ``weeks``
    before it, besides the four ahead and the default one."""
    with psycopg.connect(conninfo, autocommit=True) as connection:
        [this_week] = connection.execute("SELECT consumer_inbox_week(now())").fetchall()[0]
        for back in range(weeks + 1):
            start = this_week - timedelta(days=7 * back)
            connection.execute(
                f"CREATE TABLE IF NOT EXISTS inbox_w{start:%Y%m%d} PARTITION OF inbox "
                f"FOR VALUES FROM ('{start.isoformat()}') "
                f"TO ('{(start + timedelta(days=7)).isoformat()}')"
            )


def trim(conninfo: str, weeks_ahead: int, default: bool) -> None:
    """Drop the weeks the migration made past ``weeks_ahead`` (four), and the default partition
    unless ``default``: fewer partitions for the claim to look into."""
    with psycopg.connect(conninfo, autocommit=True) as connection:
        [this_week] = connection.execute("SELECT consumer_inbox_week(now())").fetchall()[0]
        for ahead in range(weeks_ahead + 1, 5):
            start = this_week + timedelta(days=7 * ahead)
            connection.execute(f"DROP TABLE IF EXISTS inbox_w{start:%Y%m%d}")
        if not default:
            connection.execute("DROP TABLE inbox_default")


def partitions(conninfo: str) -> int:
    with psycopg.connect(conninfo) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'inbox'::regclass"
        ).fetchone()
    return int(row[0]) if row else 0


def round_of(conninfo: str, mode: str, pairs: int) -> tuple[float, float]:
    """(backend CPU seconds, wall seconds) of ``pairs`` claims of new keys and their finishes."""
    batch = uuid.uuid4().hex[:8]
    with psycopg.connect(conninfo, autocommit=True) as connection:
        backend = [connection.info.backend_pid]
        now = datetime.now(UTC)
        for warm in range(100):  # prepared, analyzed and planned before the measure
            if warm == 50:
                connection.execute(f"ANALYZE {MODES[mode].analyzed}")
            pair(connection, MODES[mode], f"warm-{batch}-{warm}", now)
        before, started = cpu_seconds(backend), time.perf_counter()
        for n in range(pairs):
            pair(connection, MODES[mode], f"job:{batch}:{n}", now)
        return spent(before, cpu_seconds(backend)), time.perf_counter() - started


def pair(connection: psycopg.Connection[Any], mode: Mode, key: str, now: Any) -> None:
    token = uuid.uuid4().hex
    values = {"key": key, "lease": now + timedelta(seconds=60), "token": token, "id": key,
              "message": Json(MESSAGE), "now": now}  # fmt: skip
    row = connection.execute(mode.claim, values, prepare=True).fetchone()
    assert row is not None, key
    finish = mode.finish.format(table=mode.finish_in or row[1])
    done = {**values, "result": Json({"ok": True})}
    assert connection.execute(finish, done, prepare=True).rowcount == 1, key


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--past-weeks", type=int, default=2)
    parser.add_argument("--weeks-ahead", type=int, default=4, choices=range(5))
    parser.add_argument("--no-default", action="store_true")
    args = parser.parse_args(argv)
    cpu: dict[str, list[float]] = {mode: [] for mode in MODES}
    wall: dict[str, list[float]] = {mode: [] for mode in MODES}
    with contextlib.ExitStack() as stack:
        layout = (args.past_weeks, args.weeks_ahead, not args.no_default)
        urls = {mode: stack.enter_context(database(mode, *layout)) for mode in MODES}
        count = partitions(urls["partitioned"])
        order = list(MODES)
        for number in range(args.rounds):
            for mode in order[number % len(order) :] + order[: number % len(order)]:
                seconds, elapsed = round_of(urls[mode], mode, args.pairs)
                cpu[mode].append(seconds * 1e6 / args.pairs)
                wall[mode].append(elapsed * 1e6 / args.pairs)
    print(f"{args.pairs} claim+finish pairs per round, medians of {args.rounds} rounds")
    print(f"{'mode':<14}{'db cpu us/pair':>16}{'wall us/pair':>14}{'vs table':>10}{'vs floor':>10}")
    medians = {mode: statistics.median(cpu[mode]) for mode in MODES}
    base, floor = medians["table"], medians["floor"]
    for mode, median in medians.items():
        print(f"{mode:<14}{median:>16.1f}{statistics.median(wall[mode]):>14.1f}"
              f"{median / base:>10.2f}{median / floor:>10.2f}")  # fmt: skip
    print(
        f"inbox claim+finish db cpu: floor {floor:.1f} us, table {base:.1f} us, function "
        f"{medians['function']:.1f} us, partitioned {medians['partitioned']:.1f} us "
        f"({count} partitions): {medians['partitioned'] / base:.2f} x"
    )


if __name__ == "__main__":
    main()
