"""The ``warm_runs`` table, on the shared ``metadata``. Migration: ``0004_warm_runs``."""

from __future__ import annotations

from sqlalchemy import JSON, Column, Float, Index, Integer, String, Table, Text

from consumer.db.schema import metadata
from consumer.db.types import UTCDateTime

warm_runs = Table(
    "warm_runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("key", Text, nullable=False, comment="inbox key of the deploy: deploy:service:release"),
    Column("service", String(200), nullable=False),
    Column("release", String(200), nullable=False),
    Column("environment", String(200), nullable=False),
    Column("warmer", String(200), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("started_at", UTCDateTime, nullable=False),
    Column("duration_ms", Float, nullable=False),
    Column("targets_ok", Integer, nullable=False),
    Column("targets_failed", Integer, nullable=False),
    Column("targets_not_reached", Integer, nullable=False),
    Column("p50_ms", Float, nullable=True),
    Column("p95_ms", Float, nullable=True),
    Column("failures", JSON, nullable=False, comment="first failures: target, status, error"),
    Column("not_reached", JSON, nullable=False, comment="first targets the budget did not cover"),
    Column("note", Text, nullable=True),
    Index("warm_runs_key", "key"),
)
