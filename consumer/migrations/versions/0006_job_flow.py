"""Flow control of jobs: ``jobs.lock_key`` (jobs sharing it run one at a time, in id order) and
the ``job_flow`` table (a limited kind's lock row, rate state and operator changes).

Revision ID: 0006_job_flow
Revises: 0002_jobs
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consumer.db.types import UTCDateTime

revision = "0006_job_flow"
down_revision = "0002_jobs"
branch_labels = None
depends_on = None

UNFINISHED_KEYED = sa.text("lock_key IS NOT NULL AND status IN ('pending', 'running')")
RUNNING_KEYED = sa.text("lock_key IS NOT NULL AND status = 'running'")
LOCK_KEY_COMMENT = "jobs sharing it run one at a time, in id order"
FLOW_LIMITS_COMMENT = "an operator's change (cap:N;rate:N/1s); NULL: as configured"


def upgrade() -> None:
    op.add_column("jobs", sa.Column("lock_key", sa.Text, nullable=True, comment=LOCK_KEY_COMMENT))
    op.create_index(
        "jobs_lock_key_queue",
        "jobs",
        ["lock_key", "id"],
        postgresql_where=UNFINISHED_KEYED,
        sqlite_where=UNFINISHED_KEYED,
    )
    op.create_index(
        "jobs_lock_key_running",
        "jobs",
        ["lock_key"],
        unique=True,
        postgresql_where=RUNNING_KEYED,
        sqlite_where=RUNNING_KEYED,
    )
    op.create_table(
        "job_flow",
        sa.Column("kind", sa.String(100), primary_key=True),
        sa.Column("limits", sa.String(200), nullable=True, comment=FLOW_LIMITS_COMMENT),
        sa.Column("tat", UTCDateTime, nullable=True, comment="the rate's theoretical arrival time"),
        sa.Column("updated_by", sa.String(200), nullable=True),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("job_flow")
    op.drop_index("jobs_lock_key_running", table_name="jobs")
    op.drop_index("jobs_lock_key_queue", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("lock_key")
