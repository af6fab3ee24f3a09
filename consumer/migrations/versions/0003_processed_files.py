"""The processed_files table: one row per processed object generation.

Revision ID: 0003_processed_files
Revises: 0001_inbox
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from consumer.db.types import UTCDateTime

revision = "0003_processed_files"
down_revision = "0001_inbox"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "processed_files",
        sa.Column("bucket", sa.Text, primary_key=True),
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column(
            "generation", sa.BigInteger, primary_key=True, comment="objects are immutable per gen."
        ),
        sa.Column("processor", sa.String(100), nullable=False),
        sa.Column(
            "status", sa.String(16), nullable=False, comment="running done partial rejected ..."
        ),
        sa.Column("size", sa.BigInteger, nullable=True),
        sa.Column("content_type", sa.Text, nullable=True),
        sa.Column(
            "checksum", sa.String(64), nullable=True, comment="verified checksum, e.g. crc32c:..."
        ),
        sa.Column("rows_accepted", sa.Integer, nullable=False),
        sa.Column("rows_rejected", sa.Integer, nullable=False),
        sa.Column(
            "jobs_created", sa.Integer, nullable=False, comment="accepted rows not already jobs"
        ),
        sa.Column("resume_line", sa.Integer, nullable=False, comment="last line committed"),
        sa.Column("resume_offset", sa.BigInteger, nullable=False, comment="byte offset after it"),
        sa.Column(
            "errors", sa.JSON, nullable=True, comment="rejected rows: [{line, error}], capped"
        ),
        sa.Column(
            "last_error", sa.Text, nullable=True, comment="why the file failed or was skipped"
        ),
        sa.Column("result", sa.JSON, nullable=True, comment="the processor's summary"),
        sa.Column("owner", sa.String(64), nullable=True, comment="token of the run that may write"),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column(
            "duration_ms", sa.BigInteger, nullable=False, comment="processing time, all attempts"
        ),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("finished_at", UTCDateTime, nullable=True),
    )
    op.create_index("processed_files_status_updated", "processed_files", ["status", "updated_at"])


def downgrade() -> None:
    op.drop_index("processed_files_status_updated", table_name="processed_files")
    op.drop_table("processed_files")
