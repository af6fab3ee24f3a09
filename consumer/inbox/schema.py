"""The ``inbox`` table, on the shared ``metadata`` (migration 0001_inbox); the tick tables are
``consumer.ticks.schema``."""

from __future__ import annotations

from sqlalchemy import JSON, Column, Index, Integer, String, Table, Text

from consumer.db.schema import metadata
from consumer.db.types import UTCDateTime

inbox = Table(
    "inbox",
    metadata,
    Column("key", Text, primary_key=True, comment="idempotency key derived from the event"),
    Column("route", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("lease_until", UTCDateTime, nullable=True),
    Column("claimed_by", String(64), nullable=True, comment="token of the current claim"),
    Column("message_id", Text, nullable=False, comment="messageId of the latest delivery"),
    Column("message", JSON, nullable=False, comment="the full message, for inspection and replay"),
    Column("result", JSON, nullable=True),
    Column("error", Text, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("finished_at", UTCDateTime, nullable=True),
    Index("inbox_status_updated", "status", "updated_at"),
)
