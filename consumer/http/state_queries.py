"""The statements the ``/metrics`` gauges read (``consumer.http.state_metrics``), each named once.

The counts are the gauges' own: each reads at most ``cap`` rows, in a subquery, so the count is a
lower bound and never a full scan. The age of the oldest due job and the tick slots are the
stores' named queries (``consumer.jobs.queries``, ``consumer.inbox.queries``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Column, Select, TextClause, func, select, text

from consumer.inbox.schema import inbox
from consumer.jobs.schema import jobs
from consumer.storage.schema import processed_files


def jobs_by_kind_status(statuses: Iterable[str], cap: int) -> Select[Any]:
    """Jobs in ``statuses`` counted by kind and status, at most ``cap`` read."""
    return _capped_counts(jobs.c.kind, jobs.c.status, statuses, cap)


def inbox_by_route_status(statuses: Iterable[str], cap: int) -> Select[Any]:
    """Inbox rows in ``statuses`` counted by route and status, at most ``cap`` read."""
    return _capped_counts(inbox.c.route, inbox.c.status, statuses, cap)


def files_by_status(cap: int) -> Select[Any]:
    """Processed files counted by status, at most ``cap`` read."""
    sample = select(processed_files.c.status).limit(cap).subquery()
    return select(sample.c.status, func.count()).group_by(sample.c.status)


def statement_timeout(milliseconds: int) -> TextClause:
    """PostgreSQL: cancel any statement of this transaction that outlasts ``milliseconds``."""
    return text(f"SET LOCAL statement_timeout = {milliseconds}")


def _capped_counts(
    group: Column[str], status: Column[str], statuses: Iterable[str], cap: int
) -> Select[Any]:
    sample = select(group, status).where(status.in_(statuses)).limit(cap).subquery()
    first, second = sample.c[group.name], sample.c[status.name]
    return select(first, second, func.count()).group_by(first, second)
