"""One history again: the branches that grew side by side end here, so the tree has one head.

Until now each feature added its migration on the revision it needed (``0003``, ``0004`` and
``0005`` on ``0001_inbox``; ``0006_job_flow`` and ``0007_job_trace`` on ``0002_jobs``), so the
tree had five heads and two revisions numbered 0006. Nothing is renamed: the revision ids are
what deployed databases record in ``alembic_version``, so renumbering would strand them. This
revision only joins the heads (no schema change): a database at all five moves here, one at
fewer runs the missing branches first, and every later migration has one parent.

Revision ID: 0009_one_history
Revises: 0003_processed_files, 0004_warm_runs, 0006_tick_control, 0007_job_trace,
    0008_job_flow_shards
Create Date: 2026-12-03
"""

from __future__ import annotations

revision = "0009_one_history"
down_revision = (
    "0003_processed_files",
    "0004_warm_runs",
    "0006_tick_control",
    "0007_job_trace",
    "0008_job_flow_shards",
)
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
