"""A capped kind's claims lock one of its ``job_flow_shard`` rows, not one row for all (all of
them when the kind is near its cap), and count its running jobs in the same statement
(PostgreSQL: ``job_flow_lock_count``).

One row for every claim of a kind made the claims commit one at a time (each holds the row to
its commit, fsync included). With shards, claims far from the cap run side by side: each keeps
room under the cap for what the holders of the other shards may be committing.

The count runs inside a ``VOLATILE`` function, after the lock: a subquery of the locking
statement would count from the statement's snapshot, taken before it waited for the lock, and
miss the jobs the previous holder claimed and committed. SQLite needs neither: its single
writer serialises claims.

Revision ID: 0008_job_flow_shards
Revises: 0006_job_flow
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_job_flow_shards"
down_revision = "0006_job_flow"
branch_labels = None
depends_on = None

CREATE_FUNCTION = """
CREATE FUNCTION job_flow_lock_count(flow_kind varchar, first_shard integer,
                                    last_shard integer, at timestamptz) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    locked integer;
BEGIN
    PERFORM 1 FROM job_flow_shard
        WHERE kind = flow_kind AND shard BETWEEN first_shard AND last_shard
        ORDER BY shard FOR UPDATE;
    GET DIAGNOSTICS locked = ROW_COUNT;
    IF locked < last_shard - first_shard + 1 THEN
        RETURN NULL;  -- the kind's shards are not there yet: the caller creates them
    END IF;
    RETURN (SELECT count(*) FROM jobs
            WHERE kind = flow_kind AND status = 'running' AND lease_until >= at);
END
$$
"""


def upgrade() -> None:
    op.create_table(
        "job_flow_shard",
        sa.Column("kind", sa.String(100), primary_key=True),
        sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(CREATE_FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION job_flow_lock_count(varchar, integer, integer, timestamptz)")
    op.drop_table("job_flow_shard")
