"""The schedule each tick task's latest slot ran under (consumer.ticks.schema), so ``consumer
status`` and the dashboard show the periods the server really runs, not their own defaults.

Revision ID: 0005_tick_schedule
Revises: 0001_inbox
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_tick_schedule"
down_revision = "0001_inbox"
branch_labels = None
depends_on = None

COMMENT = "the schedule the last slot ran under (seconds or cron:EXPRESSION@ZONE)"


def upgrade() -> None:
    op.add_column(
        "tick_progress", sa.Column("schedule", sa.String(200), nullable=True, comment=COMMENT)
    )


def downgrade() -> None:
    with op.batch_alter_table("tick_progress") as batch:
        batch.drop_column("schedule")
