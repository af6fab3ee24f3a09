"""Retiring a week writes WAL for the partition, not for its rows: 100,000 finished rows past
retention go with far under 50 bytes of WAL a row (the chunked ``DELETE`` wrote up to 740,
docs/capacity.md). Serial: the WAL position is the server's, which other tests' writes move."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import Engine, text

from consumer.inbox.partitions import make_ahead, retire
from tests.inbox.weeks import WEEK, monday

pytestmark = [pytest.mark.postgres, pytest.mark.serial]

ROWS = 100_000
TARGET_BYTES_PER_ROW = 50
M = monday(8)
NOW = M + 2 * WEEK + timedelta(days=1)
"""At a 7-day retention, week M ends before the cutoff and the next one after it."""

FILL = """
INSERT INTO inbox (key, route, status, attempts, claimed_by, message_id, message, result,
                   created_at, updated_at, finished_at, placed_at)
SELECT 'wal:' || n, 'job', 'done', 1, md5(n::text), n::text,
       json_build_object('messageId', n::text, 'data', repeat(md5(n::text), 9)),
       '{"ok": true}'::json, t, t, t, :week
FROM generate_series(1, :rows) AS n,
     LATERAL (SELECT :week + interval '1 second' * (n % 86400) AS t) AS made
"""


def wal_position(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT pg_current_wal_insert_lsn() - '0/0'")).scalar())


def test_retiring_a_week_of_rows_writes_far_under_50_bytes_of_wal_a_row(pg_engine: Engine) -> None:
    engine = pg_engine
    make_ahead(engine, M, weeks=3)
    retire(engine, M, NOW)  # the migration's empty partitions, out of the measure
    with engine.begin() as connection:
        connection.execute(text(FILL), {"rows": ROWS, "week": M})
        connection.execute(text("CHECKPOINT"))
    before = wal_position(engine)
    retired = retire(engine, NOW - timedelta(days=7), NOW)
    written = wal_position(engine) - before
    assert retired.dropped == [f"inbox_w{M:%Y%m%d}"], retired
    assert abs(retired.rows - ROWS) < ROWS / 20, retired  # an estimate, once autovacuum analyzed
    per_row = written / ROWS
    print(f"retire: {written} bytes of WAL for {ROWS} rows, {per_row:.3f} bytes/row")
    assert per_row < TARGET_BYTES_PER_ROW / 5, f"{per_row:.1f} bytes of WAL a row"
