"""The tick tables ``tick_progress``, ``tick_control`` and ``tick_runs``, on the shared
``metadata`` (migrations 0001_inbox, 0005_tick_schedule and 0006_tick_control); their statements
are ``consumer.ticks.queries``."""

from __future__ import annotations

from sqlalchemy import Column, String, Table, Text

from consumer.db.schema import metadata
from consumer.db.types import UTCDateTime

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
