"""A running job can be cancelled, and an HTTP target's job can outlive the call that started it
(docs/long-running-jobs.md): ``jobs.cancel_requested_at`` records an operator's request on a
running job (its lease heartbeat reads it; however the run ends, the job ends ``cancelled``), and
``jobs.result`` keeps the result object a target reports with ``POST /jobs/{id}/complete``.

Revision ID: 0011_running_cancel
Revises: 0010_sql_enqueue
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consumer.db.types import UTCDateTime

revision = "0011_running_cancel"
down_revision = "0010_sql_enqueue"
branch_labels = None
depends_on = None

CANCEL_COMMENT = "an operator asked to cancel the running job; it ends cancelled"
RESULT_COMMENT = "the result object a target reported with its completion"


def upgrade() -> None:
    op.add_column(
        "jobs",
        sa.Column("cancel_requested_at", UTCDateTime(), nullable=True, comment=CANCEL_COMMENT),
    )
    op.add_column("jobs", sa.Column("result", sa.JSON(), nullable=True, comment=RESULT_COMMENT))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("result")
        batch.drop_column("cancel_requested_at")
