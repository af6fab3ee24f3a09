"""A capped kind's running jobs counted in the statement that locks its ``job_flow`` row
(PostgreSQL): ``job_flow_running(kind, at)``.

A subquery in that statement would count from the statement's snapshot, taken before it waited
for the lock, and miss the jobs the previous lock holder claimed and committed. A ``VOLATILE``
function takes a fresh snapshot for its query, evaluated once the row is locked, so one round
trip does what a lock and a separate count did. SQLite needs none: its single writer serialises
claims.

Revision ID: 0008_job_flow_running
Revises: 0006_job_flow
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0008_job_flow_running"
down_revision = "0006_job_flow"
branch_labels = None
depends_on = None

CREATE = """
CREATE FUNCTION job_flow_running(flow_kind varchar, at timestamptz) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN (SELECT count(*) FROM jobs
            WHERE kind = flow_kind AND status = 'running' AND lease_until >= at);
END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(CREATE)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION job_flow_running(varchar, timestamptz)")
