"""The ``inbox`` table, on the shared ``metadata`` (migrations 0001_inbox and 0014_inbox_placed; on
PostgreSQL it is partitioned by week, 0015_inbox_partitions); the tick tables are
``consumer.ticks.schema``."""

from __future__ import annotations

import re

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
    Column(
        "placed_at",
        UTCDateTime,
        nullable=False,
        comment="start (Monday 00:00 UTC) of the week whose partition holds the row",
    ),
    Index("inbox_status_updated", "status", "updated_at"),
)

PARTITION_NAME = re.compile(r"inbox_(legacy|default|w\d{8})")
"""The inbox's partitions: the table as it was, the default, and the weeks by their Monday."""
PARTITIONING = re.compile(rf"(?:{PARTITION_NAME.pattern})(_.*)?|inbox_key_placed")
"""The names PostgreSQL's partitioned inbox adds beside this model (``0015_inbox_partitions``,
``consumer.inbox.partitions``): the partitions, their indexes, and the parent's unique index on
``(key, placed_at)``, which stands for the primary key (a partitioned table's unique index must
hold its partition key). Partitions come and go with time; the model is the parent's columns."""
