"""Every SQL statement on the tick tables (``tick_progress``, ``tick_control``, ``tick_runs``,
defined in ``consumer.ticks.schema``), each named once; ``TickStore`` and
``TickControl`` run them, the dashboard and the metrics read the whole-table ones."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Delete, Insert, Select, Update, delete, or_, select, update

from consumer.db import dialect as sql
from consumer.ticks.schema import tick_control, tick_progress, tick_runs

# --- tick_progress --------------------------------------------------------------------------------


def last_slot(task: str) -> Select[Any]:
    """One task's latest completed slot."""
    return select(tick_progress.c.last_slot).where(tick_progress.c.task == task)


LAST_SLOTS = select(tick_progress.c.task, tick_progress.c.last_slot)
"""Every task's latest completed slot, one row per task (the metrics)."""

SERVED = select(tick_progress.c.task, tick_progress.c.last_slot, tick_progress.c.schedule)
"""Every task's latest completed slot and the schedule it ran under (the dashboard, status)."""


def advance_slot(dialect: str, task: str, slot: datetime, schedule: str) -> Any:
    """Record ``slot`` as ``task``'s latest, and the ``schedule`` the server ran it under,
    unless a later slot is recorded already."""
    return sql.upsert(
        tick_progress,
        dialect,
        {"task": task, "last_slot": slot, "schedule": schedule},
        conflict=[tick_progress.c.task],
        set_=lambda excluded: {"last_slot": excluded.last_slot, "schedule": excluded.schedule},
        where=lambda excluded: tick_progress.c.last_slot < excluded.last_slot,
    )


# --- tick_control ---------------------------------------------------------------------------------


def pause(dialect: str, task: str, now: datetime, by: str, reason: str) -> Insert:
    """Mark ``task`` paused, unless it is already (the first pause keeps its time and author);
    returns the task when this statement paused it."""
    values = {"task": task, "paused_at": now, "paused_by": by, "reason": reason}
    return sql.insert_ignore(tick_control, dialect).values(values).returning(tick_control.c.task)


def resume(task: str) -> Delete:
    return delete(tick_control).where(tick_control.c.task == task)


def paused(task: str) -> Select[Any]:
    """One task's pause, if it is paused."""
    return select(tick_control).where(tick_control.c.task == task)


ALL_PAUSED = select(tick_control).order_by(tick_control.c.task)
"""Every paused task (status, the dashboard, the metrics)."""


# --- tick_runs ------------------------------------------------------------------------------------


def take_run(dialect: str, task: str, key: str, lease_until: datetime, now: datetime) -> Any:
    """Make ``key`` the run holding ``task``, unless another run's lease is live; returns the key
    when taken. One statement: of two runs taking the task at once, one gets it."""
    return sql.upsert(
        tick_runs,
        dialect,
        {"task": task, "key": key, "lease_until": lease_until, "taken_at": now},
        conflict=[tick_runs.c.task],
        set_=lambda excluded: {
            "key": excluded.key,
            "lease_until": excluded.lease_until,
            "taken_at": excluded.taken_at,
        },
        where=lambda excluded: or_(
            tick_runs.c.lease_until < excluded.taken_at, tick_runs.c.key == excluded.key
        ),
    ).returning(tick_runs.c.key)


def run_holder(task: str, now: datetime) -> Select[Any]:
    """The key of the run holding ``task`` with a live lease."""
    return select(tick_runs.c.key).where(tick_runs.c.task == task, tick_runs.c.lease_until > now)


def renew_run(task: str, key: str, lease_until: datetime) -> Update:
    return (
        update(tick_runs)
        .where(tick_runs.c.task == task, tick_runs.c.key == key)
        .values(lease_until=lease_until)
    )


def release_run(task: str, key: str) -> Delete:
    return delete(tick_runs).where(tick_runs.c.task == task, tick_runs.c.key == key)
