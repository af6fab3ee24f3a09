"""The jobs table for the pending-job sweep.

Revision ID: 0002_jobs
Revises: 0001_inbox
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consumer.db.types import UTCDateTime

revision = "0002_jobs"
down_revision = "0001_inbox"
branch_labels = None
depends_on = None

PENDING = sa.text("status = 'pending'")
RUNNING = sa.text("status = 'running'")
FINISHED = sa.text("finished_at IS NOT NULL")


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column(
            "kind",
            sa.String(100),
            nullable=False,
            comment="job kind, looked up in the kind registry",
        ),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column(
            "status", sa.String(16), nullable=False, comment="pending running done dead cancelled"
        ),
        sa.Column("priority", sa.Integer, nullable=False, comment="higher runs first"),
        sa.Column("run_at", UTCDateTime, nullable=False, comment="not claimed before this time"),
        sa.Column(
            "attempts", sa.Integer, nullable=False, comment="claims so far, takeovers included"
        ),
        sa.Column("max_attempts", sa.Integer, nullable=True, comment="NULL: the sweep's default"),
        sa.Column("lease_until", UTCDateTime, nullable=True),
        sa.Column("claimed_by", sa.String(64), nullable=True, comment="token of the current claim"),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column(
            "errors", sa.JSON, nullable=True, comment="error history: [{attempt, at, error}]"
        ),
        sa.Column("idempotency_key", sa.Text, nullable=True, comment="unique among retained jobs"),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("finished_at", UTCDateTime, nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index("jobs_idempotency_key", "jobs", ["idempotency_key"], unique=True)
    op.create_index(
        "jobs_claimable",
        "jobs",
        [sa.text("priority DESC"), "run_at", "id"],
        postgresql_where=PENDING,
        sqlite_where=PENDING,
    )
    op.create_index(
        "jobs_leases", "jobs", ["lease_until"], postgresql_where=RUNNING, sqlite_where=RUNNING
    )
    op.create_index(
        "jobs_finished", "jobs", ["finished_at"], postgresql_where=FINISHED, sqlite_where=FINISHED
    )


def downgrade() -> None:
    op.drop_index("jobs_finished", table_name="jobs")
    op.drop_index("jobs_leases", table_name="jobs")
    op.drop_index("jobs_claimable", table_name="jobs")
    op.drop_index("jobs_idempotency_key", table_name="jobs")
    op.drop_table("jobs")
