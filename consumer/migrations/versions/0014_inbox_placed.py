"""The inbox's claim, ready for partitions (docs/retention.md): ``inbox.placed_at`` names the week
a row was placed in, and on PostgreSQL the claim becomes one function that keeps a key unique
across partitions.

A partitioned table's unique index must contain its partition key, so once the inbox is split by
week (``0015_inbox_partitions``) ``ON CONFLICT (key)`` can no longer see a row of the same key in
another week. ``consumer_inbox_claim`` takes a transaction-scoped advisory lock on the key's hash
first, in a statement of its own, so its next statements (each with a snapshot of its own, as
PL/pgSQL runs them under READ COMMITTED) see whatever an earlier holder of the lock committed;
then it looks the key up once in every partition: absent, it inserts the row into the week of
``p_now``; failed or lease-expired, it takes the row over where it lives (the update checks the
row again: a finish takes no lock, and may have ended it meanwhile); otherwise (held by a live
lease, or finished) it returns nothing. It returns the row's attempt count and the partition
that holds it, which the finish updates directly: an update of the parent that names the row's
week is planned afresh on every run (PostgreSQL keeps a custom plan where partitions can be pruned),
which cost more than the lookup (``bench/inbox_claim.py``).

Additive: code from before this revision keeps working on it (its ``ON CONFLICT (key)`` still has
the primary key to infer; rows it inserts take the column's default). Existing rows, and rows
that default, are placed in 1970: before every week partition, in the partition that will hold
the table as it was. SQLite gets the column too (one model for both), and nothing reads it there.

Revision ID: 0014_inbox_placed
Revises: 0013_notify_trigger
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consumer.db.types import UTCDateTime

revision = "0014_inbox_placed"
down_revision = "0013_notify_trigger"
branch_labels = None
depends_on = None

PLACED_COMMENT = "start (Monday 00:00 UTC) of the week whose partition holds the row"
EPOCH = {"postgresql": "1970-01-01 00:00:00+00", "sqlite": "1970-01-01 00:00:00.000000"}
"""A constant default adds the column without rewriting the table."""

PG_FUNCTIONS = """
CREATE FUNCTION consumer_inbox_week(ts timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN date_bin('7 days', ts, TIMESTAMPTZ '2000-01-03 00:00:00+00');

CREATE FUNCTION consumer_inbox_claim(
    p_key text, p_route varchar, p_lease_until timestamptz, p_claimed_by varchar,
    p_message_id text, p_message json, p_now timestamptz
) RETURNS TABLE (attempts integer, stored_in text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    held_status varchar;
    held_lease timestamptz;
    held_placed timestamptz;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'consumer_inbox_claim runs under READ COMMITTED only'
            USING ERRCODE = '55000', HINT = 'its lookup must see what the lock''s last holder '
                                            'committed; set default_transaction_isolation back';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 0));
    SELECT i.status, i.lease_until, i.placed_at INTO held_status, held_lease, held_placed
    FROM inbox AS i WHERE i.key = p_key;
    IF NOT FOUND THEN
        RETURN QUERY
            INSERT INTO inbox AS i (key, route, status, attempts, lease_until, claimed_by,
                                    message_id, message, created_at, updated_at, placed_at)
            VALUES (p_key, p_route, 'running', 1, p_lease_until, p_claimed_by, p_message_id,
                    p_message, p_now, p_now, consumer_inbox_week(p_now))
            ON CONFLICT DO NOTHING
            RETURNING i.attempts, i.tableoid::regclass::text;
    ELSIF held_status = 'failed' OR (held_status = 'running' AND held_lease < p_now) THEN
        RETURN QUERY
            UPDATE inbox AS i SET
                status = 'running', attempts = i.attempts + 1, lease_until = p_lease_until,
                claimed_by = p_claimed_by, message_id = p_message_id, message = p_message,
                updated_at = p_now
            WHERE i.key = p_key AND i.placed_at = held_placed
              AND (i.status = 'failed' OR (i.status = 'running' AND i.lease_until < p_now))
            RETURNING i.attempts, i.tableoid::regclass::text;
    END IF;
END
$$;
"""
"""Under REPEATABLE READ the lookup's snapshot would be the transaction's first, blind to what the
lock's last holder committed: the claim refuses to run there. ``ON CONFLICT DO NOTHING``: a
writer that does not take the lock (code from before this
revision, during a rollout) may insert the key between the lookup and the insert; the claim then
finds it held, as ``ON CONFLICT (key)`` would have."""


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.add_column(
        "inbox",
        sa.Column(
            "placed_at",
            UTCDateTime(),
            nullable=False,
            server_default=sa.text(f"'{EPOCH[dialect]}'"),
            comment=PLACED_COMMENT,
        ),
    )
    if dialect == "postgresql":
        op.execute(PG_FUNCTIONS)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "DROP FUNCTION consumer_inbox_claim"
            "(text, varchar, timestamptz, varchar, text, json, timestamptz)"
        )
        op.execute("DROP FUNCTION consumer_inbox_week(timestamptz)")
    with op.batch_alter_table("inbox") as batch:
        batch.drop_column("placed_at")
