"""The ``inbox``, ``tick_progress``, ``tick_control`` and ``tick_runs`` tables, on the shared
``metadata`` (migrations 0001_inbox, 0005_tick_schedule and 0006_tick_control). The tick tables'
statements are ``consumer.ticks.queries``; the tables stay here while the migrations' environment
lists this module as theirs."""

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

tick_progress = Table(
    "tick_progress",
    metadata,
    Column("task", String(200), primary_key=True),
    Column("last_slot", UTCDateTime, nullable=False, comment="latest completed schedule slot"),
    Column(
        "schedule",
        String(200),
        nullable=True,
        comment="the schedule the last slot ran under (seconds or cron:EXPRESSION@ZONE)",
    ),
)

tick_control = Table(
    "tick_control",
    metadata,
    Column("task", String(200), primary_key=True, comment="a paused tick task"),
    Column("paused_at", UTCDateTime, nullable=False),
    Column("paused_by", String(200), nullable=False, comment="who paused it"),
    Column("reason", Text, nullable=False, comment="why, as its author gave it"),
)
"""A row per paused task: its ticks are recorded ``skipped`` (reason "paused") on every pod."""

tick_runs = Table(
    "tick_runs",
    metadata,
    Column("task", String(200), primary_key=True, comment="a tick task whose overlap is not allow"),
    Column("key", Text, nullable=False, comment="inbox key of the run holding the task"),
    Column("lease_until", UTCDateTime, nullable=False, comment="the run's claim lease"),
    Column("taken_at", UTCDateTime, nullable=False),
)
"""The run of each task that holds it (overlap ``skip`` or ``wait``): taken by one conditional
upsert, so two pods that claim two slots at the same moment cannot both run."""
