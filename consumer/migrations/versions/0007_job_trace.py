"""The trace context each job was enqueued under (consumer.jobs.schema), so the job's span is a
child of the span that enqueued it: one trace from the push to the job's effect.

Revision ID: 0007_job_trace
Revises: 0002_jobs
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_job_trace"
down_revision = "0002_jobs"
branch_labels = None
depends_on = None

COMMENT = "W3C traceparent of the span that enqueued the job (migration 0007_job_trace)"


def upgrade() -> None:
    op.add_column("jobs", sa.Column("trace_parent", sa.String(55), nullable=True, comment=COMMENT))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("trace_parent")
