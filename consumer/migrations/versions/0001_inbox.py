"""The inbox and tick progress.

Revision ID: 0001_inbox
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consumer.db.types import UTCDateTime

revision = "0001_inbox"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "inbox",
        sa.Column(
            "key", sa.Text, primary_key=True, comment="idempotency key derived from the event"
        ),
        sa.Column("route", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("lease_until", UTCDateTime, nullable=True),
        sa.Column("claimed_by", sa.String(64), nullable=True, comment="token of the current claim"),
        sa.Column(
            "message_id", sa.Text, nullable=False, comment="messageId of the latest delivery"
        ),
        sa.Column(
            "message",
            sa.JSON,
            nullable=False,
            comment="the full message, for inspection and replay",
        ),
        sa.Column("result", sa.JSON, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("finished_at", UTCDateTime, nullable=True),
    )
    op.create_index("inbox_status_updated", "inbox", ["status", "updated_at"])
    op.create_table(
        "tick_progress",
        sa.Column("task", sa.String(200), primary_key=True),
        sa.Column(
            "last_slot", UTCDateTime, nullable=False, comment="latest completed schedule slot"
        ),
    )


def downgrade() -> None:
    op.drop_table("tick_progress")
    op.drop_index("inbox_status_updated", table_name="inbox")
    op.drop_table("inbox")
