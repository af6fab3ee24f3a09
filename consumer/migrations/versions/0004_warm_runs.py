"""Warm runs: one row per cache warmer run of one release (consumer.deploy.schema).

Revision ID: 0004_warm_runs
Revises: 0001_inbox
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consumer.db.types import UTCDateTime

revision = "0004_warm_runs"
down_revision = "0001_inbox"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "warm_runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "key",
            sa.Text,
            nullable=False,
            comment="inbox key of the deploy: deploy:service:release",
        ),
        sa.Column("service", sa.String(200), nullable=False),
        sa.Column("release", sa.String(200), nullable=False),
        sa.Column("environment", sa.String(200), nullable=False),
        sa.Column("warmer", sa.String(200), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("targets_ok", sa.Integer, nullable=False),
        sa.Column("targets_failed", sa.Integer, nullable=False),
        sa.Column("targets_not_reached", sa.Integer, nullable=False),
        sa.Column("p50_ms", sa.Float, nullable=True),
        sa.Column("p95_ms", sa.Float, nullable=True),
        sa.Column(
            "failures", sa.JSON, nullable=False, comment="first failures: target, status, error"
        ),
        sa.Column(
            "not_reached",
            sa.JSON,
            nullable=False,
            comment="first targets the budget did not cover",
        ),
        sa.Column("note", sa.Text, nullable=True),
    )
    op.create_index("warm_runs_key", "warm_runs", ["key"])


def downgrade() -> None:
    op.drop_index("warm_runs_key", table_name="warm_runs")
    op.drop_table("warm_runs")
