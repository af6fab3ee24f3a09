"""The PostgreSQL inbox partitioned by week, on a live database (docs/retention.md). SQLite is
unchanged.

Retention then drops a week's partition whole instead of deleting its rows one by one
(``consumer.inbox.partitions``). The table as it was, if it holds rows, becomes the first
partition, ``inbox_legacy``, for every ``placed_at`` before ``W0``, the first Monday at least a day
ahead (rows placed before this revision, and rows placed this week, land there); week partitions
``inbox_wYYYYMMDD`` follow for four weeks, and ``inbox_default`` takes anything outside the weeks
made (a clock far ahead, a retention task that stopped making weeks), so a claim never fails for
want of a partition.

Steps, so that no lock is held for longer than a rename:
1. the unique index the new parent needs, ``(key, placed_at)``, built on the old table
   ``CONCURRENTLY`` (outside a transaction);
2. ``CHECK (placed_at < W0)`` added ``NOT VALID`` and validated, which scans the table under a
   lock that lets writes go on; attaching the table as the partition then trusts it instead of
   scanning again;
3. one transaction, under ``lock_timeout``: rename the table and its indexes, create the parent
   with its indexes, attach the old table (its indexes are adopted, not rebuilt), create the week
   partitions and the default one, drop the check.

An inbox found empty under step 3's lock (a fresh install, a database no push reached yet) is
dropped instead of attached: the weeks then start with the current one, and no push ever lands
in a partition that keeps the old table's third index (its primary key on ``key``) beside the
two every week has.

Code from before ``0014_inbox_placed`` fails its claims from step 3 on (``ON CONFLICT (key)``
has no unique index to infer on the parent); Pub/Sub redelivers them to pods on the new code.

Revision ID: 0015_inbox_partitions
Revises: 0014_inbox_placed
Create Date: 2026-12-04
"""

from __future__ import annotations

from datetime import datetime, timedelta

from alembic import op
from sqlalchemy import text

revision = "0015_inbox_partitions"
down_revision = "0014_inbox_placed"
branch_labels = None
depends_on = None

WEEKS_AHEAD = 4
LOCK_TIMEOUT = "5s"
"""Step 3 waits this long at most for the pushes in flight to let go of the table; past it the
migration fails, changes nothing, and can be run again."""
KEY_PLACED = "inbox_legacy_key_placed"
LEGACY_RANGE = "inbox_legacy_range"

PARENT = """
CREATE TABLE inbox (
    key text NOT NULL,
    route varchar(16) NOT NULL,
    status varchar(16) NOT NULL,
    attempts integer NOT NULL,
    lease_until timestamptz,
    claimed_by varchar(64),
    message_id text NOT NULL,
    message json NOT NULL,
    result json,
    error text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    finished_at timestamptz,
    placed_at timestamptz NOT NULL DEFAULT consumer_inbox_week(statement_timestamp())
) PARTITION BY RANGE (placed_at);
COMMENT ON COLUMN inbox.key IS 'idempotency key derived from the event';
COMMENT ON COLUMN inbox.claimed_by IS 'token of the current claim';
COMMENT ON COLUMN inbox.message_id IS 'messageId of the latest delivery';
COMMENT ON COLUMN inbox.message IS 'the full message, for inspection and replay';
COMMENT ON COLUMN inbox.placed_at IS
    'start (Monday 00:00 UTC) of the week whose partition holds the row';
CREATE UNIQUE INDEX inbox_key_placed ON inbox (key, placed_at);
CREATE INDEX inbox_status_updated ON inbox (status, updated_at);
"""


def week_partition(start: datetime) -> str:
    """``CREATE TABLE`` of the partition for the week starting at ``start``."""
    end = start + timedelta(days=7)
    return (
        f"CREATE TABLE inbox_w{start:%Y%m%d} PARTITION OF inbox "
        f"FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"
    )


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    first = bind.execute(
        text("SELECT consumer_inbox_week(now() + interval '1 day') + interval '7 days'")
    ).scalar_one()
    with op.get_context().autocommit_block():
        invalid = bind.execute(
            text("SELECT 1 FROM pg_index WHERE indexrelid = to_regclass(:name) AND NOT indisvalid"),
            {"name": KEY_PLACED},
        ).first()
        if invalid is not None:  # left by a run that failed while building it
            op.execute(f"DROP INDEX CONCURRENTLY {KEY_PLACED}")
        op.execute(
            f"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS {KEY_PLACED} ON inbox (key, placed_at)"
        )
        op.execute(f"ALTER TABLE inbox DROP CONSTRAINT IF EXISTS {LEGACY_RANGE}")
        op.execute(
            f"ALTER TABLE inbox ADD CONSTRAINT {LEGACY_RANGE} "
            f"CHECK (placed_at < '{first.isoformat()}') NOT VALID"
        )
        op.execute(f"ALTER TABLE inbox VALIDATE CONSTRAINT {LEGACY_RANGE}")
    op.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    op.execute("ALTER TABLE inbox RENAME TO inbox_legacy")
    op.execute("ALTER TABLE inbox_legacy RENAME CONSTRAINT inbox_pkey TO inbox_legacy_pkey")
    op.execute("ALTER INDEX inbox_status_updated RENAME TO inbox_legacy_status_updated")
    op.execute(PARENT)
    if bind.execute(text("SELECT EXISTS (SELECT 1 FROM inbox_legacy)")).scalar_one():
        op.execute(
            "ALTER TABLE inbox ATTACH PARTITION inbox_legacy "
            f"FOR VALUES FROM (MINVALUE) TO ('{first.isoformat()}')"
        )
        op.execute(f"ALTER TABLE inbox_legacy DROP CONSTRAINT {LEGACY_RANGE}")
        weeks = [first + timedelta(days=7 * week) for week in range(WEEKS_AHEAD)]
    else:  # empty under the rename's lock: no row to keep, none can arrive before the commit
        op.execute("DROP TABLE inbox_legacy")
        this_week = bind.execute(text("SELECT consumer_inbox_week(now())")).scalar_one()
        weeks = [this_week + timedelta(days=7 * week) for week in range(WEEKS_AHEAD + 1)]
    for week in weeks:
        op.execute(week_partition(week))
    op.execute("CREATE TABLE inbox_default PARTITION OF inbox DEFAULT")


def downgrade() -> None:
    """Back to one table: every row copied under a lock that stops the pushes (not live)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE inbox RENAME TO inbox_partitioned")
    op.execute("ALTER INDEX inbox_status_updated RENAME TO inbox_partitioned_status_updated")
    op.execute("CREATE TABLE inbox (LIKE inbox_partitioned INCLUDING DEFAULTS INCLUDING COMMENTS)")
    op.execute("ALTER TABLE inbox ALTER COLUMN placed_at SET DEFAULT '1970-01-01 00:00:00+00'")
    op.execute("INSERT INTO inbox SELECT * FROM inbox_partitioned")
    op.execute("DROP TABLE inbox_partitioned")
    op.execute("ALTER TABLE inbox ADD PRIMARY KEY (key)")
    op.execute("CREATE INDEX inbox_status_updated ON inbox (status, updated_at)")
