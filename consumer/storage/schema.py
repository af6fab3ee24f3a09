"""The ``processed_files`` table, on the shared ``metadata`` (migration 0003_processed_files)."""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Column, Index, Integer, String, Table, Text

from consumer.db.schema import metadata
from consumer.db.types import UTCDateTime

processed_files = Table(
    "processed_files",
    metadata,
    Column("bucket", Text, primary_key=True),
    Column("name", Text, primary_key=True),
    Column("generation", BigInteger, primary_key=True, comment="objects are immutable per gen."),
    Column("processor", String(100), nullable=False),
    Column("status", String(16), nullable=False, comment="running done partial rejected ..."),
    Column("size", BigInteger, nullable=True),
    Column("content_type", Text, nullable=True),
    Column("checksum", String(64), nullable=True, comment="verified checksum, e.g. crc32c:..."),
    Column("rows_accepted", Integer, nullable=False),
    Column("rows_rejected", Integer, nullable=False),
    Column("jobs_created", Integer, nullable=False, comment="accepted rows not already jobs"),
    Column("resume_line", Integer, nullable=False, comment="last line committed"),
    Column("resume_offset", BigInteger, nullable=False, comment="byte offset after it"),
    Column("errors", JSON, nullable=True, comment="rejected rows: [{line, error}], capped"),
    Column("last_error", Text, nullable=True, comment="why the file failed or was skipped"),
    Column("result", JSON, nullable=True, comment="the processor's summary"),
    Column("owner", String(64), nullable=True, comment="token of the run that may write"),
    Column("attempts", Integer, nullable=False),
    Column("duration_ms", BigInteger, nullable=False, comment="processing time, all attempts"),
    Column("started_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime, nullable=True),
    Index("processed_files_status_updated", "status", "updated_at"),
)
