"""Activity over time for the overview's plots: deliveries by outcome and jobs finished or dead,
per minute over the last hour and per hour over the last day, counted by the database in one
grouped query per plot (a row per status and bucket, so at most a few hundred rows however
busy the service is), read through the indexes the counts already use (``inbox_status_updated``,
``jobs_finished``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, func, literal_column, select

from consumer.db.dialect import POSTGRESQL
from consumer.db.engine import unavailable_on_db_fault
from consumer.inbox.model import Status
from consumer.inbox.schema import inbox
from consumer.jobs.model import Status as JobStatus
from consumer.jobs.schema import jobs

JOB_RESULTS = (JobStatus.DONE, JobStatus.DEAD)


@dataclass(frozen=True)
class Window:
    """A plot's span: ``buckets`` of ``step`` ending with the one holding ``now``."""

    name: str
    step: timedelta
    buckets: int
    width: int
    """Characters of an ISO timestamp that name a bucket (16: the minute, 13: the hour)."""

    def starts(self, now: datetime) -> list[datetime]:
        last = now.replace(second=0, microsecond=0)
        if self.step >= timedelta(hours=1):
            last = last.replace(minute=0)
        return [last - self.step * n for n in range(self.buckets - 1, -1, -1)]


HOUR = Window("last hour, per minute", timedelta(minutes=1), 60, 16)
DAY = Window("last day, per hour", timedelta(hours=1), 24, 13)


@dataclass(frozen=True)
class Series:
    """Counts per bucket by status, the buckets' start times in order."""

    window: Window
    starts: Sequence[datetime]
    counts: Mapping[str, Sequence[int]]

    @property
    def total(self) -> int:
        return sum(sum(values) for values in self.counts.values())


def deliveries(engine: Engine, now: datetime, window: Window) -> Series:
    """Inbox rows by outcome, bucketed by their last write."""
    since = window.starts(now)[0]
    column = inbox.c.updated_at
    query = (
        select(inbox.c.status, _bucket(column, engine.dialect.name, window), func.count())
        .where(inbox.c.status.in_(list(Status)), column >= since)
        .group_by(inbox.c.status, _bucket(column, engine.dialect.name, window))
    )
    return _series(engine, query, now, window)


def job_results(engine: Engine, now: datetime, window: Window) -> Series:
    """Jobs that finished done or dead, bucketed by when they finished."""
    since = window.starts(now)[0]
    column = jobs.c.finished_at
    query = (
        select(jobs.c.status, _bucket(column, engine.dialect.name, window), func.count())
        .where(column >= since, jobs.c.status.in_([s.value for s in JOB_RESULTS]))
        .group_by(jobs.c.status, _bucket(column, engine.dialect.name, window))
    )
    return _series(engine, query, now, window)


def _bucket(column: Any, dialect: str, window: Window) -> Any:
    """The bucket a timestamp falls in, as its ISO prefix (``2026-12-01 09:14``): SQLite keeps
    UTC timestamps as such text; PostgreSQL formats its ``timestamptz`` in UTC."""
    if dialect == POSTGRESQL:
        # constants inlined, not bound: the GROUP BY must repeat the SELECT's expression exactly
        pattern = "'YYYY-MM-DD HH24:MI'" if window.width == 16 else "'YYYY-MM-DD HH24'"
        return func.to_char(func.timezone(literal_column("'UTC'"), column), literal_column(pattern))
    return func.substr(column, 1, window.width)


def _series(engine: Engine, query: Any, now: datetime, window: Window) -> Series:
    starts = window.starts(now)
    index = {start.isoformat(sep=" ")[: window.width]: n for n, start in enumerate(starts)}
    counts: dict[str, list[int]] = {}
    with unavailable_on_db_fault(), engine.connect() as connection:
        for status, bucket, count in connection.execute(query):
            slot = index.get(str(bucket))
            if slot is not None:  # a row written after ``now`` (clock skew) is left out
                counts.setdefault(str(status), [0] * len(starts))[slot] += int(count)
    return Series(window, starts, dict(sorted(counts.items())))
