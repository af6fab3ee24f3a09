"""Paused tick tasks (one row per paused task, read by every pod) and the run holding each task
whose overlap policy is skip or wait (consumer.ticks.schema).

Revision ID: 0006_tick_control
Revises: 0005_tick_schedule
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consumer.db.types import UTCDateTime

revision = "0006_tick_control"
down_revision = "0005_tick_schedule"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tick_control",
        sa.Column("task", sa.String(200), primary_key=True, comment="a paused tick task"),
        sa.Column("paused_at", UTCDateTime, nullable=False),
        sa.Column("paused_by", sa.String(200), nullable=False, comment="who paused it"),
        sa.Column("reason", sa.Text, nullable=False, comment="why, as its author gave it"),
    )
    op.create_table(
        "tick_runs",
        sa.Column(
            "task",
            sa.String(200),
            primary_key=True,
            comment="a tick task whose overlap is not allow",
        ),
        sa.Column("key", sa.Text, nullable=False, comment="inbox key of the run holding the task"),
        sa.Column("lease_until", UTCDateTime, nullable=False, comment="the run's claim lease"),
        sa.Column("taken_at", UTCDateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("tick_runs")
    op.drop_table("tick_control")
