"""Read queries the dashboard needs beyond the stores' own, each named once.

Lists are ``LIMIT``ed and the inbox counts read the ``(status, updated_at)`` index. The job counts
by kind and status scan the retained jobs (bench/dashboard_bench.py measures what a page costs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, func, select

from consumer.db.engine import unavailable_on_db_fault
from consumer.deploy.store import WarmRun, WarmRuns
from consumer.inbox.model import InboxRow, Status
from consumer.inbox.schema import inbox
from consumer.jobs import queries as job_queries
from consumer.jobs.model import Status as JobStatus
from consumer.jobs.schema import jobs
from consumer.pipeline.registry import Registry
from consumer.storage.model import FileRow
from consumer.storage.store import ProcessedFiles
from consumer.ticks import queries as tick_queries
from consumer.ticks.pauses import Pause
from consumer.wire.schedule import Schedule, ScheduleError
from consumer.wire.schedule import parse as parse_schedule

RECENT = 8
"""Recent file imports and warm runs shown on the overview."""


@dataclass(frozen=True)
class TaskSchedule:
    """A tick task: its last completed slot and when its next slot is due."""

    name: str
    period_seconds: float
    """Between the latest two fire times (a cron task's period varies)."""
    last_slot: datetime | None
    next_due: datetime
    late: bool
    """A whole slot went by since the last completed one (a missed or failing tick)."""
    pause: Pause | None = None
    """Set while an operator has the task paused (``consumer tasks pause``)."""
    registered: bool = True
    """A task this process knows (only those can be paused or run from here)."""


@dataclass(frozen=True)
class Overview:
    now: datetime
    deliveries_hour: Mapping[str, int]
    deliveries_day: Mapping[str, int]
    jobs: Mapping[str, Mapping[str, int]]
    """Job counts by kind, then status."""
    oldest_due_seconds: float | None
    dead_events: int
    unroutable_events: int
    dead_jobs: int
    tasks: Sequence[TaskSchedule]
    files: Sequence[FileRow]
    warm_runs: Sequence[WarmRun]


def overview(engine: Engine, registry: Registry, now: datetime) -> Overview:
    """Everything the overview page and ``consumer status`` show, in a few grouped queries."""
    by_kind = job_counts(engine)
    totals = event_totals(engine)
    return Overview(
        now=now,
        deliveries_hour=deliveries_since(engine, now - timedelta(hours=1)),
        deliveries_day=deliveries_since(engine, now - timedelta(days=1)),
        jobs=by_kind,
        oldest_due_seconds=oldest_due_age(engine, now),
        dead_events=totals.get(Status.DEAD, 0),
        unroutable_events=totals.get(Status.UNROUTABLE, 0),
        dead_jobs=sum(counts.get(JobStatus.DEAD, 0) for counts in by_kind.values()),
        tasks=task_schedules(engine, registry, now),
        files=ProcessedFiles(engine).list(limit=RECENT),
        warm_runs=WarmRuns(engine).recent(RECENT),
    )


def _counts(engine: Engine, query: Any) -> list[Any]:
    with unavailable_on_db_fault(), engine.connect() as connection:
        return list(connection.execute(query))


def deliveries_since(engine: Engine, since: datetime) -> dict[str, int]:
    """Inbox rows by outcome, among those last written since ``since``. Naming every status lets
    the ``(status, updated_at)`` index read only the window, not the whole retained inbox."""
    query = (
        select(inbox.c.status, func.count())
        .where(inbox.c.status.in_(list(Status)), inbox.c.updated_at >= since)
        .group_by(inbox.c.status)
    )
    return {status: int(count) for status, count in _counts(engine, query)}


def event_totals(engine: Engine) -> dict[str, int]:
    """Dead and unroutable rows, whatever their age: they wait for a replay (index-only)."""
    waiting = [Status.DEAD, Status.UNROUTABLE]
    query = (
        select(inbox.c.status, func.count())
        .where(inbox.c.status.in_(waiting))
        .group_by(inbox.c.status)
    )
    return {status: int(count) for status, count in _counts(engine, query)}


def job_counts(engine: Engine) -> dict[str, dict[str, int]]:
    """Jobs by kind (sorted), then status: one ``GROUP BY kind, status`` in the database, never
    the rows themselves (the overview's table, the jobs page's kinds and retry-all counts)."""
    query = select(jobs.c.kind, jobs.c.status, func.count()).group_by(jobs.c.kind, jobs.c.status)
    counts: dict[str, dict[str, int]] = {}
    for kind, status, count in _counts(engine, query):
        counts.setdefault(kind, {})[status] = int(count)
    return dict(sorted(counts.items()))


def oldest_due_age(engine: Engine, now: datetime) -> float | None:
    """Seconds the oldest due pending job has waited; ``None`` when nothing is due."""
    with unavailable_on_db_fault(), engine.connect() as connection:
        oldest = connection.execute(job_queries.oldest_due(now)).scalar()
    return None if oldest is None else max(0.0, (now - oldest).total_seconds())


def task_schedules(engine: Engine, registry: Registry, now: datetime) -> list[TaskSchedule]:
    """Each registered tick task (and any task with recorded progress), by name, on the
    schedule the server last ran it under: this process's own settings may not be the server's
    (``consumer serve --local`` ticks the sweep every 10 s; a ``consumer status`` beside it
    would say 5 minutes). A task that never ran is shown on this process's schedule."""
    with unavailable_on_db_fault(), engine.connect() as connection:
        rows = connection.execute(tick_queries.SERVED).all()
        pauses = [Pause.from_row(row) for row in connection.execute(tick_queries.ALL_PAUSED)]
    paused = {pause.task: pause for pause in pauses}
    slots = {task: slot for task, slot, _ in rows}
    served = {task: schedule_or_none(text) for task, _, text in rows}
    schedules = []
    for name in sorted(set(registry.tasks) | set(slots)):
        schedule = served.get(name) or registry.schedule_of(name)
        current = schedule.slot_of(now)
        last = slots.get(name)
        late = last is not None and last < schedule.previous(current)
        period = (current - schedule.previous(current)).total_seconds()
        due, known = schedule.following(current), name in registry.tasks
        schedules.append(TaskSchedule(name, period, last, due, late, paused.get(name), known))
    return schedules


def schedule_or_none(text: str | None) -> Schedule | None:
    """A recorded schedule, or None for a slot recorded before schedules were (or a schedule
    this code no longer reads)."""
    try:
        return parse_schedule(text) if text else None
    except ScheduleError:
        return None


def inbox_rows(
    engine: Engine,
    status: Status | None = None,
    route: str | None = None,
    key_contains: str | None = None,
    limit: int = 100,
) -> list[InboxRow]:
    """The inbox, most recently updated first, filtered by status, route and part of the key."""
    query = select(inbox).order_by(inbox.c.updated_at.desc()).limit(limit)
    if status is not None:
        query = query.where(inbox.c.status == status)
    if route:
        query = query.where(inbox.c.route == route)
    if key_contains:
        query = query.where(inbox.c.key.contains(key_contains, autoescape=True))
    with unavailable_on_db_fault(), engine.connect() as connection:
        return [InboxRow.from_row(row) for row in connection.execute(query)]


def routes(engine: Engine) -> list[str]:
    """Routes that have inbox rows (for the filter)."""
    query = select(inbox.c.route).distinct().order_by(inbox.c.route)
    with unavailable_on_db_fault(), engine.connect() as connection:
        return list(connection.execute(query).scalars())


def dead_events_by_route(engine: Engine) -> dict[str, int]:
    """Dead inbox rows per route (the replay-all buttons)."""
    query = (
        select(inbox.c.route, func.count())
        .where(inbox.c.status == Status.DEAD)
        .group_by(inbox.c.route)
        .order_by(inbox.c.route)
    )
    return {route: int(count) for route, count in _counts(engine, query)}


def dead_keys(engine: Engine, route: str, limit: int) -> list[str]:
    """Keys of the dead events of one route, oldest first (the replay-all action)."""
    query = (
        select(inbox.c.key)
        .where(inbox.c.status == Status.DEAD, inbox.c.route == route)
        .order_by(inbox.c.updated_at)
        .limit(limit)
    )
    with unavailable_on_db_fault(), engine.connect() as connection:
        return list(connection.execute(query).scalars())
